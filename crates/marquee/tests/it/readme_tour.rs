//! The README's curl tour, run as written: every shell block marked `<!-- tour -->` in
//! README.md, in order in one `bash -euo pipefail`, against a fresh `marquee serve --demo` (as
//! the README starts it), with `localhost:8080` replaced by the server's address. A README
//! example that fails, or answers with an API error, fails this test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, Guard, Server, free_port, repo_root, token_from};

const MARKER: &str = "<!-- tour -->";
/// The address the README's examples use, replaced by the test server's.
const README_HOST: &str = "localhost:8080";
/// The shared secret the README starts the demo with, for its snapshot step.
const AGGREGATION_TOKEN: &str = "a-long-shared-secret-0123";

/// The `sh` blocks that directly follow a `<!-- tour -->` line, in order.
fn tour_blocks(readme: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        if line.trim() != MARKER {
            continue;
        }
        let fence = lines.next().unwrap_or_default();
        assert_eq!(
            fence.trim(),
            "```sh",
            "README.md: {MARKER} must be followed by a ```sh block"
        );
        let body: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        blocks.push(body.join("\n"));
    }
    blocks
}

fn require_tools() {
    for tool in ["curl", "jq"] {
        let found = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            found,
            "{tool} is missing (the README's tour uses it): run scripts/test-deps.sh"
        );
    }
}

#[test]
#[ignore = "needs curl and jq: scripts/test.sh installs them"]
fn readme_tour_runs_as_written() {
    require_tools();
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let blocks = tour_blocks(&readme);
    assert!(
        blocks.len() >= 3,
        "README.md: expected the tour's {MARKER} blocks (API, serving, bidding), found {}",
        blocks.len()
    );
    assert!(
        readme.contains(&format!(
            "MARQUEE_AGGREGATION__TOKEN={AGGREGATION_TOKEN} marquee serve --demo"
        )),
        "README.md: the tour's start command changed; start the server here the same way"
    );

    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--demo", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data")
        .arg(data.path())
        .env("MARQUEE_AGGREGATION__TOKEN", AGGREGATION_TOKEN);
    let server = Guard::new(Server::spawn(command));
    let token = token_from(&server.server().stderr_line("demo admin token"));

    // Each block announces itself, so that output and failures can be told apart.
    let mut script = String::new();
    for (i, block) in blocks.iter().enumerate() {
        script.push_str(&format!("echo '### tour block {}'\n{block}\n", i + 1));
    }
    let script = script.replace(README_HOST, &format!("127.0.0.1:{port}"));
    assert!(
        !script.contains(":8080"),
        "a tour example names port 8080 other than as {README_HOST}:\n{script}"
    );

    let bin_dir = std::path::Path::new(BIN).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let mut child = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(&root)
        .env("TOKEN", &token)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read both pipes while the script runs (a full pipe would stall it).
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        out_pipe.read_to_string(&mut s).unwrap();
        s
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        err_pipe.read_to_string(&mut s).unwrap();
        s
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the README's tour took over two minutes");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = stdout.join().unwrap();
    let err = stderr.join().unwrap();
    let report = format!("script:\n{script}\n--- stdout:\n{out}\n--- stderr:\n{err}");
    assert!(
        status.success(),
        "the README's tour failed ({status})\n{report}"
    );

    // The API answers every example without an error object.
    assert!(!out.contains(r#"{"error":"#), "an API error\n{report}");
    for expected in [
        r#"{"status":"ok"}"#,                 // healthz
        r#""/api/v1/campaigns""#,             // the OpenAPI document's paths
        r#"{"items":[{"#,                     // the demo's line items and campaigns
        r#""async":"<ins class=\"marquee\""#, // placement tags
        "/t/i?t=",                            // the ad document's signed impression URL
        r#""ads":[{"placement":1"#,           // several placements in one call
        r#""seatbid":[{"bid":"#,              // a bid
        r#""nurl":"#,
        r#""group_by":["line_item"]"#,   // the JSON report
        "time,line_item,",               // the CSV report
        "marquee_bidder_requests_total", // metrics
    ] {
        assert!(
            out.contains(expected),
            "no {expected:?} in the tour's output\n{report}"
        );
    }
    // The rename took, on the campaign just created, as its second version.
    let renamed = out
        .lines()
        .find(|line| line.contains(r#""name":"Spring sale 2027""#))
        .unwrap_or_else(|| panic!("no renamed campaign in the tour's output\n{report}"));
    assert!(renamed.contains(r#""version":2"#), "{renamed}\n{report}");
    // The snapshot, read with the shared secret (header names in any case).
    assert!(
        out.to_ascii_lowercase().contains("etag: \"v"),
        "no snapshot ETag in the tour's output\n{report}"
    );
}
