//! The configuration crate's own checks.
// figment's Jail closures must return figment's own (large) error type.
#![allow(clippy::result_large_err)]
use super::*;
use figment::Jail;

fn load_in(jail: &Jail, toml: &str) -> Result<Config, ConfigError> {
    jail.create_file("marquee.toml", toml)
        .map_err(|e| ConfigError::Invalid(e.to_string()))?;
    Config::load(Some(Path::new("marquee.toml")), &Overrides::default())
}

#[test]
fn defaults_need_no_file() {
    Jail::expect_with(|_| {
        let config = Config::load(None, &Overrides::default()).map_err(|e| e.to_string())?;
        assert_eq!(config, Config::default());
        Ok(())
    });
}

#[test]
fn dashboard_cookies_follow_the_dashboard_s_origin_not_the_edges() {
    Jail::expect_with(|jail| {
        let https_edges = "[edge]\npublic_url = \"https://ads.example.com\"\n";
        let http_edges = "[edge]\npublic_url = \"http://ads.example.com\"\n";
        let config = |jail: &Jail, toml: &str| load_in(jail, toml).map_err(|e| e.to_string());
        // `marquee serve`: one origin, the edge's.
        let serve = |c: &Config| {
            let url = c.edge.public_url.as_ref().map(PublicUrl::as_str);
            c.dashboard.secure_cookies(Some(url.unwrap_or("")))
        };
        assert!(serve(&config(jail, https_edges)?));
        assert!(!serve(&config(jail, http_edges)?));
        // `marquee manager`: the setting, whatever the edges' URL; on when unset.
        let manager = |c: &Config| c.dashboard.secure_cookies(None);
        let plain = "[dashboard]\nsecure_cookies = false\n";
        assert!(!manager(&config(jail, &format!("{https_edges}{plain}"))?));
        let tls = "[dashboard]\nsecure_cookies = true\n";
        assert!(manager(&config(jail, &format!("{http_edges}{tls}"))?));
        assert!(manager(&config(jail, http_edges)?));
        // Set, it wins in `marquee serve` too.
        assert!(!serve(&config(jail, &format!("{https_edges}{plain}"))?));
        jail.set_env("MARQUEE_DASHBOARD__SECURE_COOKIES", "false");
        assert!(!manager(&config(jail, "")?));
        Ok(())
    });
}

#[test]
fn text_loads_like_a_file_and_bad_text_is_named() {
    Jail::expect_with(|_| {
        let config = Config::from_toml("[snapshot]\nkeep = 7\n").map_err(|e| e.to_string())?;
        assert_eq!(config.snapshot.keep, 7);
        let error = Config::from_toml("[snapshot]\nkeep = \"seven\"\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("keep"), "{error}");
        Ok(())
    });
}

#[test]
fn the_replay_capacity_is_set_by_file_or_environment_and_checked() {
    Jail::expect_with(|jail| {
        let config = |jail: &Jail, toml: &str| load_in(jail, toml).map_err(|e| e.to_string());
        assert_eq!(
            config(jail, "")?.tracking.replay_capacity_per_minute,
            262_144
        );
        let toml = "[tracking]\nreplay_capacity_per_minute = 8000000\n";
        assert_eq!(
            config(jail, toml)?.tracking.replay_capacity_per_minute,
            8_000_000
        );
        jail.set_env("MARQUEE_TRACKING__REPLAY_CAPACITY_PER_MINUTE", "1000");
        let error = config(jail, "").err().unwrap_or_default();
        assert!(
            error.contains("`tracking.replay_capacity_per_minute` is 1000; it must be between"),
            "{error}"
        );
        Ok(())
    });
}

#[test]
fn geo_databases_are_set_by_file_or_environment_and_the_interval_checked() {
    Jail::expect_with(|jail| {
        let config = |jail: &Jail, toml: &str| load_in(jail, toml).map_err(|e| e.to_string());
        assert_eq!(config(jail, "")?.geo, GeoSection::default());
        let toml = "[geo]\ndatabase = \"/srv/GeoLite2-City.mmdb\"\n";
        let geo = config(jail, toml)?.geo;
        assert_eq!(geo.database, Some(PathBuf::from("/srv/GeoLite2-City.mmdb")));
        assert_eq!(geo.asn_database, None);
        jail.set_env("MARQUEE_GEO__ASN_DATABASE", "/srv/asn.mmdb");
        jail.set_env("MARQUEE_GEO__RELOAD_INTERVAL_SECS", "0");
        let error = config(jail, toml).err().unwrap_or_default();
        assert!(
            error.contains("`geo.reload_interval_secs` is 0; it must be between"),
            "{error}"
        );
        jail.set_env("MARQUEE_GEO__RELOAD_INTERVAL_SECS", "30");
        let geo = config(jail, toml)?.geo;
        assert_eq!(geo.asn_database, Some(PathBuf::from("/srv/asn.mmdb")));
        assert_eq!(geo.reload_interval, std::time::Duration::from_secs(30));
        Ok(())
    });
}

#[test]
fn the_forecast_sample_is_one_percent_by_default_and_set_by_file_or_environment() {
    Jail::expect_with(|jail| {
        let config = |jail: &Jail, toml: &str| load_in(jail, toml).map_err(|e| e.to_string());
        let forecast = config(jail, "")?.forecast;
        assert_eq!(forecast, ForecastSection::default());
        assert!((forecast.sample_rate() - 0.01).abs() < 1e-12);
        assert_eq!(forecast.history_days, 28);
        let toml = "[forecast]\nsample_rate_ppm = 0\nmax_mb_per_day = 2\n";
        let forecast = config(jail, toml)?.forecast;
        assert_eq!(forecast.sample_rate(), 0.0);
        assert_eq!(forecast.max_bytes_per_day(), 2 << 20);
        jail.set_env("MARQUEE_FORECAST__HISTORY_DAYS", "56");
        assert_eq!(config(jail, toml)?.forecast.history_days, 56);
        Ok(())
    });
}

#[test]
fn file_then_environment_then_flags() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "marquee.toml",
            "listen = \"127.0.0.1:9000\"\ndata_dir = \"/tmp/a\"\n[snapshot]\nkeep = 7\n",
        )?;
        jail.set_env("MARQUEE_DATA_DIR", "/tmp/b");
        jail.set_env("MARQUEE_SNAPSHOT__COMPILE_INTERVAL_MS", "250");
        let overrides = Overrides {
            demo: Some(true),
            ..Overrides::default()
        };
        let config =
            Config::load(Some(Path::new("marquee.toml")), &overrides).map_err(|e| e.to_string())?;
        assert_eq!(config.listen.port(), 9000);
        assert_eq!(config.data_dir, PathBuf::from("/tmp/b"));
        assert_eq!(config.snapshot.keep, 7);
        assert_eq!(
            config.snapshot.compile_interval,
            std::time::Duration::from_millis(250)
        );
        assert!(config.demo);
        Ok(())
    });
}

#[test]
fn database_url_selects_the_store() {
    Jail::expect_with(|jail| {
        let config = Config::load(None, &Overrides::default()).map_err(|e| e.to_string())?;
        assert_eq!(
            config.database(),
            Database::Sqlite(PathBuf::from("./data/marquee.db"))
        );
        let config =
            load_in(jail, "[database]\nurl = \"sqlite:/srv/m.db\"").map_err(|e| e.to_string())?;
        assert_eq!(
            config.database(),
            Database::Sqlite(PathBuf::from("/srv/m.db"))
        );
        jail.set_env("MARQUEE_DATABASE__URL", "postgres://m:pw@db:5432/marquee");
        let config = Config::load(None, &Overrides::default()).map_err(|e| e.to_string())?;
        let database = config.database();
        assert_eq!(
            database,
            Database::Postgres("postgres://m:pw@db:5432/marquee".into())
        );
        assert_eq!(database.describe(), "postgres://m:***@db:5432/marquee");
        let flag = Overrides {
            database_url: Some("postgresql://db/other".into()),
            ..Overrides::default()
        };
        let config = Config::load(None, &flag).map_err(|e| e.to_string())?;
        assert_eq!(
            config.database(),
            Database::Postgres("postgresql://db/other".into())
        );
        Ok(())
    });
}

#[test]
fn passwords_are_hidden_from_descriptions() {
    for (url, shown) in [
        ("postgres://u:p@h/d", "postgres://u:***@h/d"),
        ("postgres://u@h/d", "postgres://u@h/d"),
        ("postgres://h:5432/d", "postgres://h:5432/d"),
        ("postgres://u:p:q@h:1/d?x=@", "postgres://u:***@h:1/d?x=@"),
    ] {
        assert_eq!(database::without_password(url), shown);
    }
    let database = Database::Postgres("postgres://u@h/d?sslmode=require&password=s3".into());
    assert_eq!(
        database.describe(),
        "postgres://u@h/d?sslmode=require&password=***"
    );
}

#[test]
fn errors_name_the_key() {
    Jail::expect_with(|jail| {
        let cases = [
            ("listen = \"nowhere\"", "listen"),
            ("[snapshot]\nkeep = \"many\"", "snapshot.keep"),
            ("[snapshot]\nkeep = 0", "snapshot.keep"),
            (
                "[snapshot]\ncompile_interval_ms = 1",
                "snapshot.compile_interval_ms",
            ),
            ("[log]\nformat = \"xml\"", "log.format"),
            ("colour = \"blue\"", "colour"),
            ("[edge]\nfallback = \"ftp://x\"", "edge.fallback"),
            (
                "[edge]\ntoken_lifetime_secs = 5",
                "edge.token_lifetime_secs",
            ),
            ("[edge]\nmax_in_flight = 2000000", "edge.max_in_flight"),
            ("[edge]\nmax_in_flight = -1", "edge.max_in_flight"),
            ("[edge]\ndeadline_ms = 0", "edge.deadline_ms"),
            (
                "[edge]\nheader_read_timeout_ms = 5",
                "edge.header_read_timeout_ms",
            ),
            ("[edge]\nbody_timeout_ms = 5", "edge.body_timeout_ms"),
            ("[edge]\nmax_header_bytes = 1024", "edge.max_header_bytes"),
            ("[edge]\npoll_interval_ms = 0", "edge.poll_interval_ms"),
            ("[edge]\nheartbeat_ms = 5000", "edge.heartbeat_ms"),
            ("[edge]\nmanager_url = \"ftp://m\"", "edge.manager_url"),
            (
                "[edge]\npublic_url = \"ads.example.com\"",
                "edge.public_url",
            ),
            ("[edge]\npublic_url = \"https://\"", "edge.public_url"),
            (
                "[edge]\npublic_url = \"https://ads.example.com/a'b\"",
                "edge.public_url",
            ),
            (
                "[edge]\npublic_url = \"https://ads.example.com/a b\"",
                "edge.public_url",
            ),
            ("[edge]\nlog_url = \"10.0.0.1:8080\"", "edge.log_url"),
            ("[database]\nurl = \"mysql://db/m\"", "database.url"),
            ("[database]\nurl = \"postgres://\"", "database.url"),
            ("[database]\nurl = \"sqlite:\"", "database.url"),
            ("[redis]\nurl = \"http://cache:6379\"", "redis.url"),
            ("[redis]\ntimeout_ms = 0", "redis.timeout_ms"),
            ("[redis]\nflush_timeout_ms = 0", "redis.flush_timeout_ms"),
            ("[redis]\nopen_ms = 1", "redis.open_ms"),
            ("[redis]\nurl = \"http://cache:6379\"", "redis.url"),
            ("[redis]\ntimeout_ms = 0", "redis.timeout_ms"),
            ("[redis]\nopen_ms = 1", "redis.open_ms"),
            ("[events]\ndurability = \"sometimes\"", "events.durability"),
            ("[events]\ngroup_commit_ms = 0", "events.group_commit_ms"),
            ("[events]\nsegment_max_mb = 0", "events.segment_max_mb"),
            ("[tracking]\nsigning_key = 300", "tracking.signing_key"),
            (
                "[tracking]\nreplay_capacity_per_minute = 100",
                "tracking.replay_capacity_per_minute",
            ),
            (
                "[tracking]\nreplay_capacity_per_minute = 200000000",
                "tracking.replay_capacity_per_minute",
            ),
            ("[aggregation]\ninterval_ms = 0", "aggregation.interval_ms"),
            ("[aggregation]\nmax_run_mb = 0", "aggregation.max_run_mb"),
            (
                "[aggregation]\nminute_retention_days = 0",
                "aggregation.minute_retention_days",
            ),
            ("[aggregation]\ntoken = \"short\"", "aggregation.token"),
            (
                "[aggregation]\nedges = [\"e1=http://10.0.0.1:8080\"]",
                "aggregation.token",
            ),
            (
                "[aggregation]\ntoken = \"0123456789abcdef\"\nedges = [\"local=http://x\"]",
                "aggregation.edges",
            ),
            (
                "[aggregation]\ntoken = \"0123456789abcdef\"\nedges = [\"e1=ftp://x\"]",
                "aggregation.edges",
            ),
            (
                "[aggregation]\ntoken = \"0123456789abcdef\"\nedges = [\"e1=http://a\", \"e1=http://b\"]",
                "aggregation.edges",
            ),
            ("[reports]\nmax_rows = 0", "reports.max_rows"),
            (
                "[forecast]\nsample_rate_ppm = 1000001",
                "forecast.sample_rate_ppm",
            ),
            ("[forecast]\nmax_mb_per_day = 0", "forecast.max_mb_per_day"),
            ("[forecast]\nhistory_days = 57", "forecast.history_days"),
            ("[pacing]\ninterval_ms = 0", "pacing.interval_ms"),
            (
                "[pacing]\nlease_renew_ms = 5000\nlease_duration_ms = 1000",
                "pacing.lease_duration_ms",
            ),
            ("[pacing]\nsync_interval_ms = 0", "pacing.sync_interval_ms"),
            ("[bidder]\nseat = \"\"", "bidder.seat"),
            ("[bidder]\ncurrency = \"usd\"", "bidder.currency"),
            ("[bidder]\ndefault_tmax_ms = 1", "bidder.default_tmax_ms"),
            (
                "[bidder]\nprice_encryption_key = \"AAAA\"",
                "bidder.price_integrity_key",
            ),
            (
                "[exchanges.x1]\nsync_url = \"ftp://x\"",
                "exchanges.x1.sync_url",
            ),
            ("[exchanges.\"a b\"]\nseat = \"s\"", "exchanges"),
            ("[currency]\nrates = { EURO = \"0.9\" }", "currency.rates"),
            ("[gateway]\nauction = \"vickrey\"", "gateway.auction"),
            ("[gateway]\nadmin_token = \"short\"", "gateway.admin_token"),
            (
                "[gateway.bidders.b1]\nendpoint = \"ftp://b.test\"",
                "gateway.bidders.b1.endpoint",
            ),
            (
                "[gateway.bidders.b1]\nendpoint = \"https:///bid\"",
                "gateway.bidders.b1.endpoint",
            ),
            (
                "[gateway.bidders.b1]\nendpoint = \"http://b.test\"\nopenrtb = \"3.0\"",
                "gateway.bidders.b1.openrtb",
            ),
            (
                "[gateway.bidders.b1]\nendpoint = \"http://b.test\"\nmedia = [\"radio\"]",
                "gateway.bidders.b1.media",
            ),
            (
                "[gateway.bidders.b1]\nendpoint = \"http://b.test\"\ntimeout_percent = 0",
                "gateway.bidders.b1.timeout_percent",
            ),
            (
                "[gateway.bidders.marquee]\nendpoint = \"http://b.test\"",
                "gateway.bidders",
            ),
            (
                "[gateway.bidders.b1]\nendpoint = \"http://b.test\"\n\
                 notice_hosts = [\"win.test:8080\"]",
                "gateway.bidders.b1.notice_hosts",
            ),
        ];
        for (toml, key) in cases {
            let error = load_in(jail, toml).expect_err(toml).to_string();
            assert!(error.contains(key), "{toml:?} gave {error:?}");
        }
        // Variables of other tools that share the prefix are ignored.
        jail.set_env("MARQUEE_BIN", "/usr/bin/marquee");
        assert!(Config::load(None, &Overrides::default()).is_ok());
        jail.set_env("MARQUEE_LISTEN", "not-an-address");
        let error = Config::load(None, &Overrides::default())
            .expect_err("bad env")
            .to_string();
        assert!(
            error.contains("listen") && error.contains("MARQUEE_"),
            "{error}"
        );
        Ok(())
    });
}

#[test]
fn gateway_bidders_may_be_https_with_a_private_ca() {
    Jail::expect_with(|jail| {
        let config = load_in(
            jail,
            "[gateway]\ntls_ca_file = \"/etc/marquee/bidders-ca.pem\"\n\
             [gateway.bidders.b1]\nendpoint = \"https://bid.example.com/openrtb\"",
        )
        .map_err(|e| e.to_string())?;
        assert_eq!(
            config.gateway.bidders["b1"].endpoint.as_str(),
            "https://bid.example.com/openrtb"
        );
        assert_eq!(
            config.gateway.tls_ca_file.as_deref(),
            Some(std::path::Path::new("/etc/marquee/bidders-ca.pem"))
        );
        Ok(())
    });
}

#[test]
fn gateway_notice_hosts_are_bare_hosts_or_a_leading_wildcard() {
    Jail::expect_with(|jail| {
        let config = load_in(
            jail,
            "[gateway.bidders.b1]\nendpoint = \"http://10.0.0.7/bid\"\n\
             notice_hosts = [\"win.example.com\", \"*.example.net\", \"10.0.0.9\", \"[fd00::9]\"]",
        )
        .map_err(|e| e.to_string())?;
        let hosts: Vec<&str> = config.gateway.bidders["b1"]
            .notice_hosts
            .iter()
            .map(NoticeHost::as_str)
            .collect();
        assert_eq!(
            hosts,
            ["win.example.com", "*.example.net", "10.0.0.9", "[fd00::9]"]
        );
        for (entry, says) in [
            ("http://win.example.com", "not a host name"),
            ("win.example.com:8080", "not a host name"),
            ("win.example.com/path", "not a host name"),
            ("", "not a host name"),
            ("::1", "IPv6 address in brackets"),
            ("*", "leading `*.`"),
            ("win.*.example.com", "leading `*.`"),
            ("*example.com", "leading `*.`"),
            ("*.10.0.0.1", "not an address"),
        ] {
            let toml = format!(
                "[gateway.bidders.b1]\nendpoint = \"http://b.test\"\n\
                 notice_hosts = [\"ok.test\", {entry:?}]"
            );
            let error = load_in(jail, &toml).expect_err(&toml).to_string();
            assert!(
                error.contains("`gateway.bidders.b1.notice_hosts.1`")
                    && error.contains(&format!("{entry:?}"))
                    && error.contains(says),
                "{entry:?} gave {error:?}"
            );
        }
        Ok(())
    });
}

#[test]
fn exchanges_take_what_they_leave_out_from_the_bidder() {
    Jail::expect_with(|jail| {
        jail.set_env("MARQUEE_EXCHANGES__ADX__SEAT", "s2");
        jail.set_env("MARQUEE_CURRENCY__RATES__EUR", "\"0.92\"");
        let config = load_in(
            jail,
            "[bidder]\nseat = \"s1\"\nlatency_margin_ms = 15\n\
             [exchanges.adx]\nno_bid_reason = true\n",
        )
        .map_err(|e| e.to_string())?;
        let adx = config.bidder.for_exchange(&config.exchanges["adx"]);
        assert_eq!(adx.seat, "s2");
        assert!(adx.no_bid_reason);
        assert_eq!(
            adx.latency_margin,
            std::time::Duration::from_millis(15),
            "from [bidder]"
        );
        assert_eq!(adx.currency, CurrencyCode::USD, "the default");
        assert_eq!(
            config.currency.rates[&CurrencyCode::try_from("EUR")?],
            "0.92",
            "the environment names it lower-case"
        );
        Ok(())
    });
}

#[test]
fn remote_edges_are_named_urls() {
    Jail::expect_with(|jail| {
        let config = load_in(
            jail,
            "[aggregation]\ntoken = \"0123456789abcdef\"\n\
             edges = [\"edge-2=http://10.0.0.7:8080\", \"b.3=http://h\"]\n",
        )
        .map_err(|e| e.to_string())?;
        let edges: Vec<(&str, &str)> = config
            .aggregation
            .edges
            .iter()
            .map(|edge| (edge.name.as_str(), edge.url.as_str()))
            .collect();
        assert_eq!(
            edges,
            vec![("edge-2", "http://10.0.0.7:8080"), ("b.3", "http://h")]
        );
        Ok(())
    });
}

#[test]
fn a_metrics_token_is_long_printable_and_set_or_absent() {
    Jail::expect_with(|jail| {
        let config = Config::load(None, &Overrides::default()).map_err(|e| e.to_string())?;
        assert_eq!(config.metrics.token, None);
        let config =
            load_in(jail, "[metrics]\ntoken = \"0123456789abcdef\"").map_err(|e| e.to_string())?;
        assert_eq!(config.metrics.token.as_deref(), Some("0123456789abcdef"));
        assert!(!format!("{config:?}").contains("0123456789abcdef"));
        for (toml, says) in [
            ("token = \"\"", "is empty"),
            ("token = \"0123456789abcde\"", "at least 16"),
            ("token = \"0123456789 abcdef\"", "without spaces"),
            ("token = \"0123456789abcdef\\n\"", "without spaces"),
            ("token = \"0123456789abcdéf\"", "printable ASCII"),
        ] {
            let error = load_in(jail, &format!("[metrics]\n{toml}"))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(error.contains("`metrics.token`"), "{toml}: {error}");
            assert!(error.contains(says), "{toml}: {error}");
            assert!(!error.contains("0123456789"), "{toml} echoed: {error}");
        }
        // From the environment too, over the file.
        jail.set_env("MARQUEE_METRICS__TOKEN", "from-the-environment");
        let config =
            load_in(jail, "[metrics]\ntoken = \"0123456789abcdef\"").map_err(|e| e.to_string())?;
        assert_eq!(
            config.metrics.token.as_deref(),
            Some("from-the-environment")
        );
        // Digits only are a number to the environment's parser: refused without echoing
        // them (or dropping a leading zero); quoted, they are text.
        jail.set_env("MARQUEE_METRICS__TOKEN", "0123456789012345678");
        let error = Config::load(None, &Overrides::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("`metrics.token`") && error.contains("quote it"),
            "{error}"
        );
        assert!(!error.contains("123456789"), "echoed: {error}");
        jail.set_env("MARQUEE_METRICS__TOKEN", "\"0123456789012345678\"");
        let config = Config::load(None, &Overrides::default()).map_err(|e| e.to_string())?;
        assert_eq!(config.metrics.token.as_deref(), Some("0123456789012345678"));
        jail.set_env("MARQUEE_METRICS__TOKEN", "short");
        let error = Config::load(None, &Overrides::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("`metrics.token`"), "{error}");
        Ok(())
    });
}

#[test]
fn a_named_file_must_exist() {
    let error = Config::load(
        Some(Path::new("/nonexistent/marquee.toml")),
        &Overrides::default(),
    );
    assert!(matches!(error, Err(ConfigError::MissingFile(_))));
}
