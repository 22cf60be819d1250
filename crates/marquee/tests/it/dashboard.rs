//! The dashboard end to end in a real browser: `marquee serve --demo`,
//! an advertiser user made with `marquee user create` (password on stdin), and
//! `tests/browser/dashboard.mjs` driving headless Chromium through the pages: sign in, a
//! validation error at its field, a line item with a targeting row and a frequency cap made
//! through the forms, its creative, a link to a placement, the next snapshot (why-not-served
//! says it serves there), the placement's copied async tag serving it on a publisher page,
//! and the impression in the report chart within seconds; then a form post without the CSRF
//! token (403) and the advertiser user refused another advertiser's line item (404).
//! `desk_in_headless_chromium` drives the trafficker's desk with `tests/browser/desk.mjs`:
//! lists, archiving asked first and cascading, upload checks, narrow screens, why-not-served
//! narrowed to one line item. `availability_check_in_headless_chromium` drives "Check
//! availability" on the line item form with `tests/browser/availability.mjs`.
//!
//! Screenshots of home, line item, report and why-not-served at 1280 and 390 pixels wide go to
//! the temporary directory, or to `$MARQUEE_SCREENSHOTS` when set (the README's come from
//! `MARQUEE_SCREENSHOTS=docs/screenshots`, relative to the repository).
//!
//! ```text
//! scripts/test-deps.sh
//! cargo test -p marquee --test it dashboard:: -- --include-ignored --nocapture
//! MARQUEE_SCREENSHOTS=docs/screenshots cargo test -p marquee --test it dashboard:: -- --include-ignored
//! ```
//!
//! The browser test is ignored by plain `cargo test` and run by `scripts/test.sh`, where a
//! missing Chromium, Node or playwright-core fails it. On a failure the temporary directory is
//! kept and printed (data directory, `browser/failure.png`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, Server, get_json, id_named, repo_root, require_browser_tools, token_from};
use serde_json::{Value, json};

const ADMIN: (&str, &str) = ("admin", "marquee-demo");
const TENANT: (&str, &str) = ("acme-ops", "acme-password-1");
/// How long the browser half may take before it is stopped.
const BROWSER_DEADLINE: Duration = Duration::from_secs(90);

/// `marquee user create`, the password on standard input.
/// A user whose name the sign-in page would refuse (over 256 bytes) is not created.
#[test]
fn user_create_refuses_a_name_no_one_could_sign_in_with() {
    let data = tempfile::tempdir().unwrap();
    let output = Command::new(BIN)
        .args([
            "user",
            "create",
            "--name",
            &"x".repeat(257),
            "--role",
            "admin",
            "--data",
        ])
        .arg(data.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(64));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("--name: 1 to 256 bytes"), "{message}");
}

/// The id of a listed line item with a goal (so with a pacing section).
fn paced_line_item(line_items: &Value) -> u64 {
    line_items["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|li| !li["goal"].is_null())
        .and_then(|li| li["id"].as_u64())
        .expect("a demo line item with a goal")
}

/// The strings of a JSON array (none when it is not one).
fn strings(value: &Value) -> Vec<&str> {
    value.as_array().map_or_else(Vec::new, |items| {
        items.iter().filter_map(Value::as_str).collect()
    })
}

/// A browser test's surroundings: `marquee serve --demo` on a scratch directory (kept when
/// the test fails), the demo's admin token, and where the page driver writes.
struct Desk {
    root: std::path::PathBuf,
    chromium: std::path::PathBuf,
    out: std::path::PathBuf,
    screens: std::path::PathBuf,
    server: Server,
    token: String,
    client: reqwest::Client,
    // Dropped last: the server stops before its directory goes.
    _scratch: common::Scratch,
}

impl Desk {
    /// Starts the demo in a scratch directory named `prefix…` with the variables `env` makes
    /// from the data directory; screenshots go to `$MARQUEE_SCREENSHOTS` when set.
    fn start(prefix: &str, env: impl FnOnce(&Path) -> Vec<(&'static str, String)>) -> Desk {
        let root = repo_root();
        let chromium = require_browser_tools(&root);
        let scratch = common::Scratch::new(prefix);
        let data = scratch.path().join("data");
        let out = scratch.browser();
        let screens = std::env::var_os("MARQUEE_SCREENSHOTS")
            .map_or_else(|| out.join("screens"), |dir| root.join(dir));
        std::fs::create_dir_all(&screens).unwrap();
        let env = env(&data);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        // Killed when the test ends, however it ends (a dropped `Server` is).
        let server = Server::start_with(&data, &["--demo"], &env);
        let token = token_from(&server.stderr_line("demo admin token"));
        Desk {
            root,
            chromium,
            out,
            screens,
            server,
            token,
            client: reqwest::Client::new(),
            _scratch: scratch,
        }
    }

    fn data(&self) -> std::path::PathBuf {
        self._scratch.path().join("data")
    }

    /// Runs the driver `script` with `config`, then the base, directories and admin sign-in
    /// every driver reads.
    fn run(&self, script: &str, mut config: Value) -> Value {
        let common = json!({
            "base": self.server.base,
            "out": self.out,
            "screens": self.screens,
            "admin": { "name": ADMIN.0, "password": ADMIN.1 },
            "timeoutMs": 15000,
        });
        for (key, value) in common.as_object().unwrap() {
            config[key] = value.clone();
        }
        let result = run_driver(&self.root, &self.chromium, &self.out, script, &config);
        eprintln!(
            "{script}: browser half {} ms; steps {}",
            result["elapsed_ms"], result["steps"]
        );
        result
    }
}

/// Runs the driver `script` (in `tests/browser`) with a deadline; its JSON, or a panic with
/// what it printed.
fn run_driver(root: &Path, chromium: &Path, out: &Path, script: &str, config: &Value) -> Value {
    let mut child = Command::new("node")
        .arg(root.join("tests/browser").join(script))
        .arg(config.to_string())
        .env("TMPDIR", out)
        .env("CHROMIUM", chromium)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start node");
    let until = Instant::now() + BROWSER_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let result: Option<Value> = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok());
    match (status, result) {
        (Some(status), Some(result)) if status.success() && result.get("error").is_none() => result,
        (status, result) => panic!(
            "the dashboard browser test failed ({status:?}): {}\nstdout: {stdout}\nstderr: {stderr}",
            result.map_or_else(String::new, |r| serde_json::to_string_pretty(&r).unwrap())
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and Node: scripts/test.sh installs them"]
async fn ad_ops_in_headless_chromium() {
    let desk = Desk::start("marquee-dashboard-", |data| {
        vec![
            ("MARQUEE_AGGREGATION__INTERVAL_MS", "250".to_owned()),
            (
                "MARQUEE_TRAFFIC__CRAWLERS_FILE",
                common::crawlers_for_headless_chromium(data),
            ),
        ]
    });
    let Desk {
        server,
        token,
        client,
        screens,
        ..
    } = &desk;
    let api = |path: &str| server.url(path);
    let advertisers = get_json(client, &api("/api/v1/advertisers"), Some(token)).await;
    let acme = id_named(&advertisers, "Acme Outdoor");
    let globex = id_named(&advertisers, "Globex Travel");
    let campaigns = get_json(
        client,
        &api(&format!("/api/v1/campaigns?parent_id={globex}")),
        Some(token),
    )
    .await;
    let campaign = campaigns["items"][0]["id"]
        .as_u64()
        .expect("a Globex campaign");
    let placements = get_json(client, &api("/api/v1/placements"), Some(token)).await;
    let placement = id_named(&placements, "News sidebar rectangle");
    let line_items = get_json(client, &api("/api/v1/line-items"), Some(token)).await;
    let paced = paced_line_item(&line_items);
    common::create_user(&desk.data(), TENANT.0, TENANT.1, "advertiser", Some(acme));

    let config = json!({
        "advertiser": { "name": TENANT.0, "password": TENANT.1 },
        "campaign": campaign,
        "placement": placement,
        "paced": paced,
    });
    let result = desk.run("dashboard.mjs", config);

    let error = result["validation_error"].as_str().unwrap_or("");
    assert!(
        error.contains("must be after start"),
        "validation error at end: {result:#}"
    );
    let line_item = result["line_item"].as_u64().expect("a line item id");
    assert!(
        result["linked"]
            .as_str()
            .unwrap()
            .contains(&format!("#{placement}"))
    );
    assert_eq!(result["creative_preview"], 1, "{result:#}");
    assert!(
        result["ad_text"]
            .as_str()
            .unwrap()
            .contains("Winter sale e2e"),
        "the publisher page shows the new creative: {result:#}"
    );
    assert!(result["impressions"].as_u64() >= Some(1), "{result:#}");
    assert!(result["report_svg"].as_u64() >= Some(1), "{result:#}");
    assert_eq!(result["csrf_status"], 403, "{result:#}");
    assert_eq!(result["foreign_status"], 404, "{result:#}");
    // A spend goal typed as "500" is 500 dollars (Globex buys in USD), shown back as money.
    let budget = &result["budget"];
    assert_eq!(budget["daily"], "500.00", "{result:#}");
    assert_eq!(budget["unit"], "$", "{result:#}");
    assert!(
        budget["pacing"]
            .as_str()
            .unwrap_or("")
            .contains("(goal $500.00 a day)"),
        "{result:#}"
    );
    let budget_id = budget["id"].as_u64().expect("the spend goal's line item");
    let stored = get_json(
        client,
        &api(&format!("/api/v1/line-items/{budget_id}")),
        Some(token),
    )
    .await;
    assert_eq!(stored["goal"]["daily_micros"], 500_000_000, "{stored:#}");
    // Three mistakes at once, at each width, linked from the summary, nothing lost.
    for width in ["1280", "390"] {
        let shown = &result["mistakes"][width];
        let items: Vec<&str> = shown["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(items.len(), 3, "{width}: {shown:#}");
        assert!(
            items[0].starts_with("End: must be after start"),
            "{shown:#}"
        );
        assert_eq!(
            items[1],
            "Daily goal: \"12.345\" has more decimals than USD has (2)"
        );
        assert!(
            items[2].starts_with("Targeting: row 1: Device must be one of: desktop, phone"),
            "{shown:#}"
        );
        assert_eq!(
            shown["links"],
            json!(["#f-end", "#f-goal.daily", "#f-targeting"])
        );
        assert!(
            shown["heading"]
                .as_str()
                .unwrap()
                .contains("3 things to fix"),
            "{shown:#}"
        );
        for (field, part) in [
            ("end", "must be after start"),
            ("daily", "more decimals"),
            ("targeting", "Device must be one of"),
        ] {
            assert!(
                shown["beside"][field].as_str().unwrap_or("").contains(part),
                "{width} {field}: {shown:#}"
            );
        }
        assert_eq!(
            shown["kept"],
            json!({
                "name": "Dashboard e2e winter budget", "price": "4.50", "metric": "spend",
                "daily": "12.345", "device": "mobile",
            }),
            "{width}"
        );
        assert_eq!(shown["hash"], "#f-goal.daily");
        assert_eq!(shown["field_in_view"], true, "{width}: {shown:#}");
        assert_eq!(shown["focused"], "f-goal.daily", "{width}: {shown:#}");
    }
    let pacing = result["pacing"].as_str().unwrap_or("");
    assert!(
        pacing.contains("goal curve stands at"),
        "pacing view: {pacing}"
    );

    // What the forms stored, as the API reads it.
    let stored = get_json(
        client,
        &api(&format!("/api/v1/line-items/{line_item}")),
        Some(token),
    )
    .await;
    assert_eq!(stored["campaign_id"], campaign);
    assert_eq!(
        stored["frequency_caps"],
        json!([{ "count": 5, "window": "1d" }])
    );
    assert_eq!(
        stored["targeting"],
        json!({ "not": { "device_type": ["tablet", "ctv"] } })
    );
    for name in [
        "home",
        "line-item",
        "report",
        "why-not-served",
        "form-errors",
    ] {
        for width in [1280, 390] {
            let shot = screens.join(format!("{name}-{width}.png"));
            assert!(shot.is_file(), "no screenshot {}", shot.display());
        }
    }
}

/// The ad-ops desk in a real browser at 1280 and 390 pixels wide, on `marquee serve --demo`
/// (`tests/browser/desk.mjs`): the line items list with its columns, sorted by a heading and
/// filtered by a campaign's name; archiving asked first with what depends on it, and a
/// placement of an archived site shown as stopped by it; uploads judged by their content
/// and size, the image kept by a refused form; a new placement's site left to choose; every
/// section reachable at 390 pixels without sideways scrolling, chart labels at least 11 px
/// with a legend; why-not-served narrowed to one line item, the request's value beside the
/// targeted ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and Node: scripts/test.sh installs them"]
async fn desk_in_headless_chromium() {
    let desk = Desk::start("marquee-desk-", |_| Vec::new());
    let Desk {
        server,
        token,
        client,
        ..
    } = &desk;
    let list = |collection: &str| {
        let (client, url, token) = (
            &client,
            server.url(&format!("/api/v1/{collection}")),
            &token,
        );
        async move { get_json(client, &url, Some(token)).await }
    };
    let sites = list("sites").await;
    let sports = id_named(&sites, "Daily Planet Sports");
    let placements = list("placements").await;
    let leaderboard = id_named(&placements, "Sports leaderboard");
    let mobile = id_named(&placements, "News mobile banner");
    let line_items = list("line-items").await;
    let travel = id_named(&line_items, "Evening travel readers");
    let paced = paced_line_item(&line_items);

    let config = json!({
        "campaign": "City getaways",
        "lineItem": travel,
        "paced": paced,
        "site": sports,
        "placement": leaderboard,
        "mobile": mobile,
    });
    let result = desk.run("desk.mjs", config);
    let texts = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .unwrap_or(&Vec::new())
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    for width in ["1280", "390"] {
        let lists = &result["lists"][width];
        let headings = texts(&lists["headings"]);
        for heading in [
            "campaign",
            "active creatives",
            "flight",
            "tier",
            "price",
            "goal",
            "delivered / expected",
            "pacing",
        ] {
            assert!(
                headings
                    .iter()
                    .any(|h| h.trim_end_matches([' ', '▲', '▼']) == heading),
                "{width}: {heading} in {headings:?}"
            );
        }
        assert_eq!(lists["sorted"], "ascending", "{width}: {lists:#}");
        assert_eq!(lists["names_sorted"], true, "{width}: {lists:#}");
        assert_eq!(lists["suggested"], 1, "{width}: {lists:#}");
        assert_eq!(
            lists["parents"],
            json!(["City getaways"]),
            "{width}: {lists:#}"
        );
        assert!(lists["rows"].as_u64() >= Some(1), "{width}: {lists:#}");
        let verdicts = [
            "on pace",
            "behind",
            "ahead",
            "stopped",
            "outside its flight",
            "—",
        ];
        let pacing = texts(&lists["pacing"]);
        // A serving line item's verdict carries its delivery forecast under it once computed.
        let forecasts = ["", "on track", "at risk", "shortfall"];
        assert!(
            !pacing.is_empty()
                && pacing.iter().all(|p| {
                    let (verdict, forecast) = p.split_once("forecast: ").unwrap_or((p, ""));
                    (verdicts.contains(&verdict) || p.starts_with("not serving"))
                        && forecasts.contains(&forecast)
                }),
            "{width}: {lists:#}"
        );
        // The table scrolls inside its marked region; the page itself does not.
        assert_eq!(lists["overflows"], false, "{width}: {lists:#}");
        let archiving = &result["archiving"][width];
        let asked = texts(&archiving["asked"]);
        assert!(
            asked
                .iter()
                .any(|line| line.contains("linked to it lose this placement")),
            "{width}: {archiving:#}"
        );
        assert_eq!(archiving["kept_serving"], 0, "{width}: {archiving:#}");
    }
    let uploads = &result["uploads"];
    assert!(
        uploads["text_refused"]
            .as_str()
            .unwrap_or("")
            .contains("“notes.png” is text, not an image"),
        "{uploads:#}"
    );
    assert!(
        uploads["size_refused"]
            .as_str()
            .unwrap_or("")
            .contains("the image is 300×250, not 728×90"),
        "{uploads:#}"
    );
    assert!(
        uploads["kept"]
            .as_str()
            .unwrap_or("")
            .contains("rectangle.png"),
        "{uploads:#}"
    );
    assert_eq!(uploads["saved_size"], "300x250", "{uploads:#}");
    assert_eq!(uploads["kept_after_new_file"], 0, "{uploads:#}");
    assert_eq!(uploads["replaced_size"], "728x90", "{uploads:#}");
    assert!(
        uploads["image_url"]
            .as_str()
            .unwrap_or("")
            .contains("/uploads/"),
        "{uploads:#}"
    );
    assert_eq!(result["new_placement_site"], "", "{result:#}");
    let narrow = &result["narrow"];
    for (name, visible) in narrow["links"].as_object().unwrap() {
        assert_eq!(
            visible, true,
            "390: the {name} link is out of view: {narrow:#}"
        );
    }
    for section in [
        "Reports",
        "Why not served",
        "Edges",
        "Line items",
        "Placements",
    ] {
        assert!(
            narrow["links"].get(section).is_some(),
            "{section}: {narrow:#}"
        );
    }
    for (section, overflows) in narrow["overflow"].as_object().unwrap() {
        assert_eq!(
            overflows, false,
            "390: {section} scrolls sideways: {narrow:#}"
        );
    }
    for (section, smallest) in narrow["smallest_label"].as_object().unwrap() {
        // Infinity (no chart on the page) comes back as null.
        assert!(
            smallest.is_null() || smallest.as_f64() >= Some(11.0),
            "390: chart labels on {section}: {narrow:#}"
        );
    }
    assert!(
        narrow["smallest_label"]["/"].as_f64() >= Some(11.0),
        "390: the home page's chart: {narrow:#}"
    );
    assert_eq!(
        narrow["legend"],
        json!(["goal curve", "delivered"]),
        "{narrow:#}"
    );
    let explained = texts(&narrow["explained"]);
    assert_eq!(explained.len(), 1, "{narrow:#}");
    assert!(
        explained[0].contains("Boots DACH mobile")
            && explained[0].contains("country — request: US; targeted: DE, AT, CH"),
        "{narrow:#}"
    );
    assert_eq!(narrow["explain_overflows"], false, "{narrow:#}");
    let site = &result["site_archived"];
    assert!(
        texts(&site["asked"])
            .iter()
            .any(|line| line.contains("active placements under it stop serving")),
        "{site:#}"
    );
    assert!(
        site["site"].as_str().unwrap_or("").contains("archived"),
        "{site:#}"
    );
    assert!(
        site["placement"]
            .as_str()
            .unwrap_or("")
            .contains("Not serving: its site “Daily Planet Sports” is archived"),
        "{site:#}"
    );
    assert!(
        texts(&site["stopped"]).contains(&"Sports leaderboard".to_owned()),
        "{site:#}"
    );
}

/// The report builder in a real browser at 1280 and 390 pixels wide, on `marquee serve --demo`
/// with impressions served on placement 1 (`tests/browser/reports.mjs`): the "Today" preset,
/// grouped by line item and placement, compared with the previous period, the placement typed
/// by its name; the table names each line item and placement beside its id and shows the
/// previous period's values, the chart's legend names the previous period and its labels are
/// at least 11 px, the page does not scroll sideways, and the downloaded CSV has the name
/// columns, the previous period's and the placement's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and Node: scripts/test.sh installs them"]
async fn report_builder_in_headless_chromium() {
    let desk = Desk::start("marquee-reports-", |_| Vec::new());
    let (server, token, client) = (&desk.server, &desk.token, &desk.client);
    let placement = get_json(client, &server.url("/api/v1/placements/1"), Some(token)).await;
    let placement = placement["name"].as_str().unwrap().to_owned();
    common::wait_for_ad(client, &server.base).await;
    for _ in 0..3 {
        common::serve_and_fire(client, &server.base, 1).await;
    }
    let result = desk.run("reports.mjs", json!({ "placement": placement }));
    for width in ["1280", "390"] {
        let report = &result["report"][width];
        let url = report["url"].as_str().unwrap_or("");
        assert!(
            url.contains("group_by=line_item") && url.contains("group_by=placement"),
            "{width}: {report:#}"
        );
        assert_eq!(report["suggested"], 1, "{width}: {report:#}");
        assert_eq!(report["error"], 0, "{width}: {report:#}");
        assert_eq!(report["compare_checked"], true, "{width}: {report:#}");
        assert!(
            report["covered"]
                .as_str()
                .unwrap_or("")
                .contains("compared with"),
            "{width}: {report:#}"
        );
        let cells = strings(&report["cells"]);
        // time, line item, placement: names beside ids.
        assert!(
            cells.len() > 3 && cells[1].contains(" (#") && !cells[1].starts_with('#'),
            "{width}: the line item's name: {report:#}"
        );
        assert_eq!(cells[2], format!("{placement} (#1)"), "{width}: {report:#}");
        assert!(
            report["previous"].as_u64() >= Some(1),
            "{width}: previous values: {report:#}"
        );
        let legend = strings(&report["legend"]);
        assert!(
            legend.contains(&"impressions") && legend.contains(&"impressions, previous period"),
            "{width}: {report:#}"
        );
        assert!(
            report["smallest_label"].as_f64() >= Some(11.0),
            "{width}: chart labels: {report:#}"
        );
        assert_eq!(report["overflows"], false, "{width}: {report:#}");
        let header = report["csv_header"].as_str().unwrap_or("");
        assert!(
            header.starts_with("time,line_item,line_item_name,placement,placement_name,"),
            "{width}: {report:#}"
        );
        assert!(
            header.contains(",previous_impressions,")
                && header.contains(",change_impressions_percent,"),
            "{width}: {report:#}"
        );
        assert_eq!(report["csv_has_placement"], true, "{width}: {report:#}");
    }
}

/// Roles on the desk, through `tests/browser/roles.mjs` at 1280 and 390 pixels wide: an
/// advertiser's user reads its line item's tier and price as text, not inputs, and uploads a
/// creative that shows pending approval; the admin finds it in the pending queue and approves
/// it; the admin's Audit page lists those changes and, filtered by kind and object, the
/// approval. The approved creative is then approved through the API too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and Node: scripts/test.sh installs them"]
async fn roles_in_headless_chromium() {
    let desk = Desk::start("marquee-roles-", |_| Vec::new());
    let (server, token, client) = (&desk.server, &desk.token, &desk.client);
    let advertisers = get_json(client, &server.url("/api/v1/advertisers"), Some(token)).await;
    let acme = id_named(&advertisers, "Acme Outdoor");
    let line_items = get_json(client, &server.url("/api/v1/line-items"), Some(token)).await;
    let campaigns = get_json(
        client,
        &server.url(&format!("/api/v1/campaigns?parent_id={acme}")),
        Some(token),
    )
    .await;
    let acme_campaigns: Vec<&Value> = campaigns["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["id"])
        .collect();
    let line_item = line_items["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|li| acme_campaigns.contains(&&li["campaign_id"]))
        .expect("an Acme line item");
    common::create_user(&desk.data(), TENANT.0, TENANT.1, "advertiser", Some(acme));

    let result = desk.run(
        "roles.mjs",
        json!({
            "advertiser": { "name": TENANT.0, "password": TENANT.1 },
            "lineItem": line_item["id"],
        }),
    );
    for width in ["1280", "390"] {
        let shown = &result[width];
        let page = &shown["line_item"];
        assert_eq!(page["tier"], line_item["tier"], "{width}: {shown:#}");
        assert!(
            page["price"]
                .as_str()
                .unwrap_or("")
                .contains(line_item["price"]["amount"].as_str().unwrap()),
            "{width}: {shown:#}"
        );
        assert_eq!(page["tier_inputs"], 0, "{width}: {shown:#}");
        assert_eq!(page["name_editable"], 1, "{width}: {shown:#}");
        assert_eq!(page["overflows"], false, "{width}: {shown:#}");
        let proposed = &shown["proposed"];
        assert_eq!(proposed["state"], "Pending approval", "{width}: {shown:#}");
        assert_eq!(proposed["review_buttons"], 0, "{width}: {shown:#}");
        let approved = &shown["approved"];
        assert_eq!(approved["queued"], 1, "{width}: {shown:#}");
        assert_eq!(approved["state"], "Approved", "{width}: {shown:#}");
        assert_eq!(approved["overflows"], false, "{width}: {shown:#}");
        let audit = &shown["audit"];
        assert_eq!(audit["nav"], true, "{width}: {shown:#}");
        assert_eq!(audit["overflows"], false, "{width}: {shown:#}");
        let rows = strings(&audit["rows"]);
        assert!(
            rows.iter()
                .any(|r| r.contains("user:acme-ops") && r.contains("create")),
            "{width}: the upload: {shown:#}"
        );
        let filtered = strings(&audit["filtered"]);
        assert_eq!(filtered.len(), 2, "create, then approval: {shown:#}");
        assert!(
            filtered[0].contains("user:admin") && filtered[0].contains("approval"),
            "{width}: {shown:#}"
        );
        let id = proposed["id"].as_u64().unwrap();
        let stored = get_json(
            client,
            &server.url(&format!("/api/v1/creatives/{id}")),
            Some(token),
        )
        .await;
        assert_eq!(stored["approval"]["state"], "approved", "{stored:#}");
    }
}

/// "Check availability" on a new line item's form in a real browser at 1280 and 390 pixels
/// wide, on `marquee serve --demo` and its synthetic sample (`tests/browser/availability.mjs`):
/// the form keeps what was typed, the Availability card shows matching and available
/// impressions, a chart of daily available against requested impressions with its legend and
/// readable labels, and the contending line items by name; the page does not scroll sideways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and Node: scripts/test.sh installs them"]
async fn availability_check_in_headless_chromium() {
    let desk = Desk::start("marquee-availability-", |_| Vec::new());
    let (server, token, client) = (&desk.server, &desk.token, &desk.client);
    let campaigns = get_json(client, &server.url("/api/v1/campaigns"), Some(token)).await;
    let campaign = id_named(&campaigns, "City getaways");
    // The forecaster is built off the request path once the first snapshot is out: wait for
    // the API to answer with figures.
    let day = |days: i64| {
        let at = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * days);
        at.strftime("%Y-%m-%dT00:00:00Z").to_string()
    };
    let proposal = json!({
        "campaign_id": campaign, "name": "ready?", "status": "active",
        "start": "2026-01-01T00:00:00", "time_zone": "UTC", "tier": "standard",
        "price": { "model": "cpm", "amount": "1", "currency": "USD" },
        "from": day(1), "to": day(8),
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer: Value = client
            .post(server.url("/api/v1/forecasts"))
            .bearer_auth(token)
            .json(&proposal)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if answer["status"] == "ok" {
            break;
        }
        assert!(Instant::now() < deadline, "no forecast: {answer}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let line_items = get_json(client, &server.url("/api/v1/line-items"), Some(token)).await;
    let edited = id_named(&line_items, "Evening travel readers");
    let result = desk.run(
        "availability.mjs",
        json!({ "campaign": campaign, "edited": edited }),
    );
    for width in ["1280", "390"] {
        let shown = &result["check"][width];
        assert_eq!(
            shown["kept_name"], "Winter sun proposal",
            "{width}: {shown:#}"
        );
        assert_eq!(shown["kept_goal"], "200000", "{width}: {shown:#}");
        assert_eq!(
            shown["kept_targeting"], "desktop, phone",
            "{width}: {shown:#}"
        );
        assert_eq!(
            strings(&shown["message"]),
            Vec::<&str>::new(),
            "{width}: {shown:#}"
        );
        let facts = strings(&shown["facts"]);
        assert!(
            facts.starts_with(&["Matching", "Available", "Requested"]),
            "{width}: {shown:#}"
        );
        assert_eq!(
            strings(&shown["values"])[2],
            "200,000",
            "{width}: {shown:#}"
        );
        let legend = strings(&shown["legend"]);
        assert!(
            legend.contains(&"Available") && legend.contains(&"Requested"),
            "{width}: {shown:#}"
        );
        assert!(
            shown["smallest_label"].as_f64() >= Some(11.0),
            "{width}: chart labels: {shown:#}"
        );
        let contending = strings(&shown["contending"]);
        assert!(
            contending.contains(&"Subscribe to the Daily Planet (#6)"),
            "{width}: {shown:#}"
        );
        assert_eq!(shown["overflows"], false, "{width}: {shown:#}");
        // An edit is forecast in place of the booked line item: kept as typed, not
        // contending with itself.
        let edit = &result["edit"][width];
        assert_eq!(edit["kept_name"], edit["edited_name"], "{width}: {edit:#}");
        assert_eq!(
            strings(&edit["message"]),
            Vec::<&str>::new(),
            "{width}: {edit:#}"
        );
        assert!(
            strings(&edit["facts"]).starts_with(&["Matching", "Available"]),
            "{width}: {edit:#}"
        );
        let suffix = format!("(#{edited})");
        assert!(
            !strings(&edit["contending"])
                .iter()
                .any(|name| name.ends_with(&suffix)),
            "{width}: {edit:#}"
        );
        assert_eq!(edit["overflows"], false, "{width}: {edit:#}");
    }
}

/// The creative library, copying and bulk archiving in a real browser at 1280 and 390 pixels
/// wide, on `marquee serve --demo` (`tests/browser/library.mjs`): a creative of the demo's
/// uploaded under one line item is added from the library to another of its advertiser's with
/// a weight and a start, shown there and on the creative's page; the line item is copied (the
/// copy paused, using the creative too); the creative is removed again; the copy is archived
/// from the list in bulk after the confirmation names it. The API then agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and Node: scripts/test.sh installs them"]
async fn library_in_headless_chromium() {
    let desk = Desk::start("marquee-library-", |_| Vec::new());
    let (server, token, client) = (&desk.server, &desk.token, &desk.client);
    let list = |collection: &str| {
        let url = server.url(&format!("/api/v1/{collection}?limit=200"));
        async move { get_json(client, &url, Some(token)).await }
    };
    let campaigns = list("campaigns").await;
    let line_items = list("line-items").await;
    let creatives = list("creatives").await;
    let items = |list: &Value| list["items"].as_array().unwrap().clone();
    let advertiser_of = |line_item: &Value| {
        items(&campaigns)
            .into_iter()
            .find(|c| c["id"] == line_item["campaign_id"])
            .map(|c| c["advertiser_id"].clone())
    };
    // A creative, and another line item of its advertiser than the one it was uploaded under.
    let (creative, target) = items(&creatives)
        .into_iter()
        .filter(|c| c["status"] != "archived")
        .find_map(|c| {
            let home = items(&line_items)
                .into_iter()
                .find(|li| li["id"] == c["line_item_id"])?;
            let advertiser = advertiser_of(&home)?;
            let target = items(&line_items).into_iter().find(|li| {
                li["id"] != home["id"]
                    && li["status"] != "archived"
                    && advertiser_of(li).as_ref() == Some(&advertiser)
            })?;
            Some((c, target))
        })
        .expect("the demo has an advertiser with two line items");
    let creative_id = creative["id"].as_u64().unwrap();
    let creative_name = creative["name"].as_str().unwrap().to_owned();
    let target_id = target["id"].as_u64().unwrap();
    let target_name = target["name"].as_str().unwrap().to_owned();

    let result = desk.run(
        "library.mjs",
        json!({ "lineItem": target_id, "creative": creative_id, "creativeName": creative_name }),
    );
    let texts = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .unwrap_or(&Vec::new())
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    let mut copies = Vec::new();
    for (width, weight) in [("1280", 30), ("390", 40)] {
        let seen = &result["widths"][width];
        assert_eq!(
            seen["preview_link"],
            format!("/creatives/{creative_id}#preview"),
            "{width}: {seen:#}"
        );
        assert!(
            texts(&seen["uses"])
                .iter()
                .any(|u| u.contains(&creative_name)
                    && u.contains(&format!("weight {weight}"))
                    && u.contains("from 2026-01-01 00:00")),
            "{width}: {seen:#}"
        );
        assert!(
            texts(&seen["used_by"])
                .iter()
                .any(|u| u.contains(&target_name) && u.contains(&format!("weight {weight}"))),
            "{width}: {seen:#}"
        );
        let copy = seen["copy_id"].as_u64().unwrap();
        assert_ne!(copy, target_id);
        assert!(
            seen["copy_title"]
                .as_str()
                .unwrap()
                .contains(&format!("Copy of {target_name}")),
            "{width}: {seen:#}"
        );
        assert_eq!(seen["copy_status"], "paused", "{width}: {seen:#}");
        assert!(
            texts(&seen["copy_uses"])
                .iter()
                .any(|u| u.contains(&creative_name)),
            "{width}: the copy shares the creative: {seen:#}"
        );
        assert!(
            !texts(&seen["uses_after_remove"])
                .iter()
                .any(|u| u.contains(&creative_name)),
            "{width}: {seen:#}"
        );
        let confirm = texts(&seen["confirm"]);
        assert_eq!(confirm.len(), 1, "{width}: {seen:#}");
        assert!(
            confirm[0].contains(&format!("Copy of {target_name}")),
            "{width}: {seen:#}"
        );
        assert!(
            seen["results_heading"]
                .as_str()
                .unwrap()
                .contains("1 of 1 line items archived"),
            "{width}: {seen:#}"
        );
        for page in ["overflows_line_item", "overflows_list", "overflows_confirm"] {
            if width == "390" {
                assert_eq!(seen[page], false, "{width}: {page} scrolls sideways");
            }
        }
        copies.push(copy);
    }

    // The API sees what the pages did.
    for copy in copies {
        let copied = get_json(
            client,
            &server.url(&format!("/api/v1/line-items/{copy}")),
            Some(token),
        )
        .await;
        assert_eq!(copied["status"], "archived", "{copied}");
    }
    let assigned = get_json(
        client,
        &server.url(&format!("/api/v1/line-items/{target_id}/creatives")),
        Some(token),
    )
    .await;
    assert_eq!(assigned["assignments"], json!([]), "{assigned}");
    let audit = get_json(
        client,
        &server.url(&format!(
            "/api/v1/audit?object_kind=line_item&object_id={target_id}"
        )),
        Some(token),
    )
    .await;
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .take(4)
        .collect();
    assert_eq!(actions, ["unassign", "assign", "unassign", "assign"]);
}
