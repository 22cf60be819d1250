//! Checks of an exposition for tests: every family against the Prometheus naming
//! conventions, and the families against the operator documentation that lists them.

/// A family as an OpenMetrics exposition describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    /// As in `# TYPE` (a counter's without `_total`).
    pub name: String,
    pub kind: String,
    pub help: String,
    pub unit: Option<String>,
}

impl Family {
    /// The name operators query and documentation uses: a counter's with `_total`.
    pub fn exposed_name(&self) -> String {
        if self.kind == "counter" {
            format!("{}_total", self.name)
        } else {
            self.name.clone()
        }
    }
}

/// The families of OpenMetrics text, in order.
pub fn families(openmetrics: &str) -> Vec<Family> {
    let mut families: Vec<Family> = Vec::new();
    let mut help = String::new();
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest.split_once(' ').map_or("", |(_, h)| h).to_owned();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            families.push(Family {
                name: name.to_owned(),
                kind: kind.to_owned(),
                help: std::mem::take(&mut help),
                unit: None,
            });
        } else if let Some(rest) = line.strip_prefix("# UNIT ")
            && let (Some(family), Some((_, unit))) = (families.last_mut(), rest.split_once(' '))
        {
            family.unit = Some(unit.to_owned());
        }
    }
    families
}

/// Units whose suffix on a name says the family measures in them.
const UNITS: [&str; 2] = ["seconds", "bytes"];

/// What is wrong with each family's name, type, help and unit (empty: nothing).
pub fn convention_violations(openmetrics: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for family in families(openmetrics) {
        let name = &family.name;
        let mut problem = |what: &str| problems.push(format!("{name}: {what}"));
        if !seen.insert(name.clone()) {
            problem("registered twice");
        }
        if !name.starts_with("marquee_") {
            problem("no marquee_ prefix");
        }
        let snake = name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && !name.contains("__")
            && !name.ends_with('_');
        if !snake {
            problem("not snake_case");
        }
        if !["counter", "gauge", "histogram"].contains(&family.kind.as_str()) {
            problem("not a counter, gauge or histogram");
        }
        if family.kind == "counter" && name.ends_with("_total") {
            problem("a counter named with _total: its samples end _total_total");
        }
        if family.kind != "counter" && name.ends_with("_total") {
            problem("_total on a family that is not a counter");
        }
        let help = family.help.trim();
        if help.len() < 2 || help == "." {
            problem("no help");
        }
        match &family.unit {
            Some(unit) if !name.ends_with(&format!("_{unit}")) => {
                problem("declares a unit its name does not end with")
            }
            None if UNITS.iter().any(|u| name.ends_with(&format!("_{u}"))) => {
                problem("named with a unit it does not declare")
            }
            _ => {}
        }
        for unit in [
            "milliseconds",
            "microseconds",
            "millis",
            "micros",
            "_ms",
            "kilobytes",
        ] {
            if name.contains(unit) {
                problem("a unit that is not a base unit");
            }
        }
    }
    problems
}

/// The `marquee_…` metric names `doc` mentions in code spans, `{a, b}` groups expanded
/// (`marquee_x_{a, b}_total` is `marquee_x_a_total` and `marquee_x_b_total`); a label
/// selector (`{stage="dropped"}`) ends a name, and prefixes (`marquee_lease_*`, names ending
/// in `_`) are not names.
pub fn documented_names(doc: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (i, span) in doc.split('`').enumerate() {
        if i % 2 == 0 {
            continue;
        }
        let mut rest = span;
        while let Some(start) = rest.find("marquee_") {
            let (candidates, after) = read_name(&rest[start..]);
            rest = after;
            if after.starts_with('*') {
                continue;
            }
            names.extend(candidates.into_iter().filter(|n| !n.ends_with('_')));
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The name at the start of `text` with its groups expanded, and the text after it.
fn read_name(text: &str) -> (Vec<String>, &str) {
    let mut names = vec![String::new()];
    let mut rest = text;
    loop {
        let plain = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(rest.len());
        for name in &mut names {
            name.push_str(&rest[..plain]);
        }
        rest = &rest[plain..];
        let group = rest.strip_prefix('{').and_then(|g| g.split_once('}'));
        let Some((inside, after)) = group.filter(|(inside, _)| {
            inside
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_, ".contains(c))
        }) else {
            return (names, rest);
        };
        names = names
            .iter()
            .flat_map(|name| {
                inside
                    .split(',')
                    .map(move |part| format!("{name}{}", part.trim()))
            })
            .collect();
        rest = after;
    }
}

/// Families of `openmetrics` that `doc` does not name, and names `doc` gives under `prefixes`
/// (the families of the exposition's component) that the exposition has not.
pub fn documentation_gaps(openmetrics: &str, doc: &str, prefixes: &[&str]) -> Vec<String> {
    let documented = documented_names(doc);
    let families = families(openmetrics);
    let mut gaps = Vec::new();
    for family in &families {
        let name = family.exposed_name();
        if !documented.contains(&name) {
            gaps.push(format!("{name} is not documented"));
        }
    }
    let exposed = |name: &str| {
        families.iter().any(|f| {
            let family = f.exposed_name();
            name == family
                || (f.kind == "histogram"
                    && ["_bucket", "_sum", "_count"]
                        .iter()
                        .any(|s| name == format!("{family}{s}")))
        })
    };
    for name in documented
        .iter()
        .filter(|n| prefixes.iter().any(|p| n.starts_with(p)))
    {
        if !exposed(name) {
            gaps.push(format!("{name} is documented but not exposed"));
        }
    }
    gaps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_from_code_spans_with_their_groups_expanded() {
        let doc = "| `marquee_x_{a, b}_total`, `marquee_y` | `marquee_z{stage=\"q\"} > 0`, \
                   `marquee_lease_*`, `marquee_edge_` and marquee_prose |";
        assert_eq!(
            documented_names(doc),
            [
                "marquee_x_a_total",
                "marquee_x_b_total",
                "marquee_y",
                "marquee_z"
            ]
        );
    }

    #[test]
    fn conventions_catch_counters_units_and_help() {
        let text = "# HELP marquee_ok_runs Runs.\n# TYPE marquee_ok_runs counter\n\
                    # HELP marquee_bad_total Bad.\n# TYPE marquee_bad_total counter\n\
                    # HELP marquee_lag_seconds .\n# TYPE marquee_lag_seconds gauge\n\
                    # HELP other_read Read.\n# TYPE other_read counter\n# UNIT other_read bytes\n# EOF\n";
        assert_eq!(
            convention_violations(text),
            [
                "marquee_bad_total: a counter named with _total: its samples end _total_total",
                "marquee_lag_seconds: no help",
                "marquee_lag_seconds: named with a unit it does not declare",
                "other_read: no marquee_ prefix",
                "other_read: declares a unit its name does not end with",
            ]
        );
    }

    #[test]
    fn gaps_are_found_both_ways() {
        let text = "# HELP marquee_a_runs Runs.\n# TYPE marquee_a_runs counter\n\
                    # HELP marquee_a_wait_seconds Wait.\n# TYPE marquee_a_wait_seconds histogram\n# EOF\n";
        let doc = "`marquee_a_runs_total`, `marquee_a_gone`, `marquee_b_other`, \
                   `marquee_a_wait_seconds_bucket`";
        assert_eq!(
            documentation_gaps(text, doc, &["marquee_a_"]),
            [
                "marquee_a_wait_seconds is not documented",
                "marquee_a_gone is documented but not exposed",
            ]
        );
    }
}
