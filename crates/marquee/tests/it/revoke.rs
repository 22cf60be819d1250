//! Revoking access from the command line while `marquee serve` runs: `marquee token revoke`
//! (the next API call with the token is refused with 401) after `marquee token list` (which
//! never shows a token), and `marquee user delete` (the user's session cookie no longer signs
//! in). Unknown ids and names are refused with a message and a non-zero status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::process::Output;

use common::{Server, create_user, run, token_from};
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

/// Signs in through the sign-in form: the session cookie.
async fn sign_in(client: &reqwest::Client, base: &str, name: &str, password: &str) -> String {
    let (_, session) = common::sign_in(client, base, "", name, password).await;
    session.expect("signed in")
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
    create_user(
        data.path(),
        "leaver",
        "correct horse battery",
        "admin",
        None,
    );
    create_user(
        data.path(),
        "stayer",
        "another long password",
        "admin",
        None,
    );
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
