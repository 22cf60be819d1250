//! Dashboard users from the command line (`marquee user create`, `marquee user delete`), the
//! demo's admin user, and
//! the dashboard mounted on the manager's router.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;

use clap::{Args, Subcommand};
use marquee_config::{Config, Overrides};
use marquee_dashboard::auth::{SIGN_IN_KEY_BYTES, SignInKey};
use marquee_dashboard::{Dashboard, DashboardOptions};
use marquee_geo::GeoSource;
use marquee_manager::Manager;
use marquee_model::{Role, SystemClock};
use marquee_store::{NewUser, Store};

use crate::{
    CommonArgs, Failure, init_logging, load_config, open_admin_store, open_store, parse_role,
};

/// The demo's dashboard admin; the README shows these credentials. Only `--demo` makes it.
pub(crate) const DEMO_USER: &str = "admin";
pub(crate) const DEMO_PASSWORD: &str = "marquee-demo";
/// How long a dashboard sign-in lasts.
const SESSION_HOURS: i64 = 12;
/// Shortest password `marquee user create` accepts.
const MIN_PASSWORD_CHARS: usize = 10;

#[derive(Debug, Subcommand)]
pub(crate) enum UserCommand {
    /// Create a dashboard user; the password is read from standard input (one line), or asked
    /// for without echo on a terminal. Only its Argon2id hash is stored.
    Create(UserCreateArgs),
    /// Delete a dashboard user and sign out every session of theirs at once.
    Delete(UserDeleteArgs),
}

#[derive(Debug, Args)]
pub(crate) struct UserDeleteArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The user's name (exact).
    #[arg(value_name = "NAME")]
    name: String,
}

#[derive(Debug, Args)]
pub(crate) struct UserCreateArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The name to sign in with.
    #[arg(long)]
    name: String,
    /// What the user may do: admin, advertiser or publisher (as API tokens).
    #[arg(long, value_parser = parse_role)]
    role: Role,
    /// The advertiser id (role advertiser) or publisher id (role publisher) the user is
    /// confined to; not allowed for admin.
    #[arg(long, value_name = "ID")]
    owner: Option<u64>,
}

/// Runs `stty` on the terminal; echo off while a password is typed.
fn set_echo(on: bool) {
    let _ = std::process::Command::new("stty")
        .arg(if on { "echo" } else { "-echo" })
        .stdin(std::process::Stdio::inherit())
        .status();
}

fn read_password() -> Result<String, Failure> {
    let stdin = std::io::stdin();
    let terminal = stdin.is_terminal();
    if terminal {
        eprint!("password for the new user: ");
        let _ = std::io::stderr().flush();
        set_echo(false);
    }
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    if terminal {
        set_echo(true);
        eprintln!();
    }
    read.map_err(|e| format!("cannot read the password from standard input: {e}"))?;
    let password = line.trim_end_matches(['\r', '\n']).to_owned();
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(Failure {
            status: 64,
            message: format!(
                "the password must have at least {MIN_PASSWORD_CHARS} characters (read from standard input)"
            ),
        });
    }
    Ok(password)
}

pub(crate) async fn run(command: UserCommand) -> Result<(), Failure> {
    match command {
        UserCommand::Create(args) => create(args).await,
        UserCommand::Delete(args) => delete(args).await,
    }
}

async fn delete(args: UserDeleteArgs) -> Result<(), Failure> {
    let (config, store) = open_admin_store(&args.common).await?;
    let Some(deleted) = store
        .delete_user(&args.name, &marquee_store::Actor::cli())
        .await?
    else {
        return Err(format!(
            "no dashboard user named {:?} in {} (names are exact)",
            args.name,
            config.database().describe()
        )
        .into());
    };
    eprintln!(
        "deleted {} user {:?} (id {}) and signed out its {} session(s)",
        deleted.user.role.as_str(),
        deleted.user.name,
        deleted.user.id,
        deleted.sessions
    );
    Ok(())
}

async fn create(args: UserCreateArgs) -> Result<(), Failure> {
    let config = load_config(&args.common, Overrides::default())?;
    init_logging(&config)?;
    let longest = marquee_dashboard::limiter::MAX_NAME_BYTES;
    if args.name.is_empty() || args.name.len() > longest {
        // The sign-in page refuses longer names, so such a user could never sign in.
        return Err(Failure {
            status: 64,
            message: format!("--name: 1 to {longest} bytes"),
        });
    }
    let password = read_password()?;
    let store = open_store(&config).await?;
    let password_hash =
        tokio::task::spawn_blocking(move || marquee_dashboard::hash_password(&password))
            .await
            .map_err(|e| e.to_string())??;
    let user = store
        .create_user(
            NewUser {
                name: args.name,
                role: args.role,
                owner_id: args.owner,
                password_hash,
            },
            &marquee_store::Actor::cli(),
        )
        .await?;
    eprintln!(
        "created {} user {:?} (id {}); sign in at the dashboard, /login",
        user.role.as_str(),
        user.name,
        user.id
    );
    Ok(())
}

/// Creates the demo's admin user (called right after the demo data is loaded).
pub(crate) async fn create_demo_user(store: &dyn Store) -> Result<(), Failure> {
    let password_hash = marquee_dashboard::hash_password(DEMO_PASSWORD)?;
    store
        .create_user(
            NewUser {
                name: DEMO_USER.to_owned(),
                role: Role::Admin,
                owner_id: None,
                password_hash,
            },
            &marquee_store::Actor::cli(),
        )
        .await?;
    Ok(())
}

/// The manager's router with the dashboard's pages at `/`. `public_url` is the edges' (for ad
/// tags); `shares_edge_origin` says whether browsers reach the dashboard under it too
/// (`marquee serve`), which then also decides its cookies' `Secure` flag when
/// `dashboard.secure_cookies` is unset. `geo` locates why-not-served's IP addresses.
pub(crate) fn with_dashboard(
    app: axum::Router,
    manager: &Arc<Manager>,
    config: &Config,
    public_url: &str,
    shares_edge_origin: bool,
    geo: Option<Arc<GeoSource>>,
) -> Result<axum::Router, Failure> {
    let key = sign_in_key(&config.data_dir)?;
    let dashboard = Dashboard::new(
        Arc::clone(manager),
        Arc::new(SystemClock),
        DashboardOptions {
            public_url: public_url.to_owned(),
            session_lifetime: jiff::SignedDuration::from_hours(SESSION_HOURS),
            uploads_dir: config.data_dir.join("uploads"),
            report_max_rows: usize::try_from(config.reports.max_rows).unwrap_or(usize::MAX),
            secure_cookies: config
                .dashboard
                .secure_cookies(shares_edge_origin.then_some(public_url)),
        },
    )
    .with_sign_in_key(key)
    .with_geo(geo)
    .with_programmatic(crate::programmatic_reports(config)?);
    Ok(app.merge(marquee_dashboard::router(Arc::new(dashboard))))
}

/// The key the sign-in form's tokens are signed with, kept in `DATA/dashboard.key` (made on
/// first start) so that a form loaded before a restart still signs in after it. One manager
/// serves the dashboard at a time; one started on another data directory has its own key, and
/// sign-in forms loaded from its predecessor are refused until reloaded.
fn sign_in_key(data_dir: &Path) -> Result<SignInKey, Failure> {
    let path = data_dir.join("dashboard.key");
    let read = || -> Result<SignInKey, Failure> {
        let text = std::fs::read_to_string(&path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        SignInKey::from_hex(&text).ok_or_else(|| {
            format!(
                "{} does not hold a key ({} hex digits); delete it to have a new one made",
                path.display(),
                2 * SIGN_IN_KEY_BYTES
            )
            .into()
        })
    };
    if path.exists() {
        return read();
    }
    let key = SignInKey::random()?;
    match crate::write_private(&path, &key.to_hex()) {
        Ok(()) => Ok(key),
        // Another process made it first: its key is the one.
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => read(),
        Err(error) => Err(format!("cannot write {}: {error}", path.display()).into()),
    }
}
