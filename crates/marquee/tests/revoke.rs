//! Revoking access from the command line while `marquee serve` runs: `marquee token revoke`
//! (the next API call with the token is refused with 401) after `marquee token list` (which
//! never shows a token), and `marquee user delete` (the user's session cookie no longer signs
//! in). Unknown ids and names are refused with a message and a non-zero status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{BIN, Server, run, token_from};
use reqwest::StatusCode;

fn marquee(data: &Path, args: &[&str]) -> Output {
    run(&[args, &["--data", data.to_str().unwrap()]].concat(), &[])
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

async fn api_status(base: &str, token: &str) -> StatusCode {
    reqwest::Client::new()
        .get(format!("{base}/api/v1/advertisers"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn a_revoked_token_is_refused_at_once() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &["--demo"]);
    let demo = token_from(&server.stderr_line("demo admin token"));

    let created = marquee(
        data.path(),
        &[
            "token",
            "create",
            "--role",
            "admin",
            "--label",
            "ci deploys",
        ],
    );
    assert!(created.status.success(), "{}", stderr(&created));
    let token = String::from_utf8(created.stdout).unwrap().trim().to_owned();
    assert_eq!(api_status(&server.base, &token).await, StatusCode::OK);

    let listed = marquee(data.path(), &["token", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert!(
        !listed.contains("mq_"),
        "a token list shows no token:\n{listed}"
    );
    let row = listed
        .lines()
        .find(|line| line.ends_with("ci deploys"))
        .unwrap_or_else(|| panic!("the new token is listed:\n{listed}"));
    let id = row.split_whitespace().next().unwrap();
    assert!(row.contains("admin"), "{row}");
    assert!(listed.contains("demo admin"), "{listed}");

    let revoked = marquee(data.path(), &["token", "revoke", id]);
    assert!(revoked.status.success(), "{}", stderr(&revoked));
    assert_eq!(
        api_status(&server.base, &token).await,
        StatusCode::UNAUTHORIZED,
        "the next call with a revoked token"
    );
    assert_eq!(api_status(&server.base, &demo).await, StatusCode::OK);
    let listed = String::from_utf8(marquee(data.path(), &["token", "list"]).stdout).unwrap();
    assert!(!listed.contains("ci deploys"), "{listed}");

    for unknown in [id, "999999"] {
        let again = marquee(data.path(), &["token", "revoke", unknown]);
        assert!(!again.status.success(), "revoking unknown id {unknown}");
        assert!(
            stderr(&again).contains(&format!("no API token with id {unknown}")),
            "{}",
            stderr(&again)
        );
    }
    server.stop();
}

fn create_user(data: &Path, name: &str, password: &str) {
    let mut child = Command::new(BIN)
        .args([
            "user", "create", "--name", name, "--role", "admin", "--data",
        ])
        .arg(data)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{password}").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}

/// The `name=value` of the cookie `name` a response sets.
fn set_cookie(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|value| value.split(';').next())
        .find(|pair| pair.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

/// Signs in through the sign-in form: the session cookie.
async fn sign_in(client: &reqwest::Client, base: &str, name: &str, password: &str) -> String {
    let form = client.get(format!("{base}/login")).send().await.unwrap();
    let bound = set_cookie(&form, "marquee_login").expect("the sign-in form's cookie");
    let form = form.text().await.unwrap();
    let marker = "name=\"csrf\" value=\"";
    let start = form.find(marker).expect("a CSRF field") + marker.len();
    let csrf = &form[start..start + form[start..].find('"').unwrap()];
    let response = client
        .post(format!("{base}/login"))
        .header("cookie", bound)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&name={name}&password={password}"))
        .send()
        .await
        .unwrap();
    set_cookie(&response, "marquee_session").expect("signed in")
}

/// Whether the session cookie opens the dashboard's home page.
async fn signed_in(client: &reqwest::Client, base: &str, session: &str) -> bool {
    client
        .get(format!("{base}/"))
        .header("cookie", session)
        .send()
        .await
        .unwrap()
        .status()
        == StatusCode::OK
}

#[tokio::test]
async fn a_deleted_user_is_signed_out_at_once() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    create_user(data.path(), "leaver", "correct horse battery");
    create_user(data.path(), "stayer", "another long password");
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let leaver = sign_in(&client, &server.base, "leaver", "correct+horse+battery").await;
    let stayer = sign_in(&client, &server.base, "stayer", "another+long+password").await;
    assert!(signed_in(&client, &server.base, &leaver).await);

    let deleted = marquee(data.path(), &["user", "delete", "leaver"]);
    assert!(deleted.status.success(), "{}", stderr(&deleted));
    assert!(
        stderr(&deleted).contains("1 session"),
        "{}",
        stderr(&deleted)
    );
    assert!(
        !signed_in(&client, &server.base, &leaver).await,
        "a deleted user's session cookie still signs in"
    );
    assert!(signed_in(&client, &server.base, &stayer).await);

    let again = marquee(data.path(), &["user", "delete", "leaver"]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("no dashboard user named \"leaver\""),
        "{}",
        stderr(&again)
    );
    server.stop();
}
