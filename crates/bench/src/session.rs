//! The user-session model: a Markov chain of page views, ad requests, impression beacons and
//! clicks with an absorbing exit (a common way to model a server's clients and find its most
//! frequent requests). Each state may send one request; the probabilities come
//! from a small TOML file whose rows replace the defaults row by row. Page views and ad requests
//! have path templates; impressions and clicks fire the signed URLs of the session's last ad
//! answer (see [`crate::workload`]), so they have none.
//!
//! The expected number of visits to each state per session is the start state's row of the
//! fundamental matrix `N = (I - Q)^-1` (Q: transitions among the non-exit states), which
//! [`SessionModel::expected_visits`] computes; the generated traffic converges to those
//! proportions.

use std::collections::BTreeMap;
use std::path::Path;

use rand::RngExt;
use serde::{Deserialize, Serialize};

use crate::BenchError;

/// A non-exit state of the chain. Leaving the chain (the user goes away) is the absorbing state
/// and takes whatever probability a row leaves over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    PageView,
    AdRequest,
    Impression,
    Click,
}

impl State {
    pub const ALL: [State; 4] = [
        State::PageView,
        State::AdRequest,
        State::Impression,
        State::Click,
    ];

    /// Position in [`State::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            State::PageView => "page_view",
            State::AdRequest => "ad_request",
            State::Impression => "impression",
            State::Click => "click",
        }
    }
}

/// The TOML file: every key optional; given transition rows replace the default rows.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    start: Option<State>,
    placements: Option<Vec<String>>,
    #[serde(default)]
    paths: BTreeMap<State, String>,
    #[serde(default)]
    transitions: BTreeMap<State, BTreeMap<State, f64>>,
}

/// A validated session model.
#[derive(Debug, Clone)]
pub struct SessionModel {
    start: State,
    placements: Vec<String>,
    /// Path template per state; empty means the state sends nothing (page views go to the
    /// publisher's site, not to the ad server, by default). Always empty for impressions and
    /// clicks, whose URLs come from the ad answer.
    paths: [String; 4],
    /// `transitions[from][to]`; `1 - row sum` is the exit probability.
    transitions: [[f64; 4]; 4],
}

impl Default for SessionModel {
    /// A plausible display-ad session: about 5 page views, 2 ad slots per page, 90% filled,
    /// 1% of impressions clicked.
    fn default() -> Self {
        let mut transitions = [[0.0; 4]; 4];
        let mut set = |from: State, to: State, p: f64| transitions[from.index()][to.index()] = p;
        set(State::PageView, State::AdRequest, 1.0);
        set(State::AdRequest, State::Impression, 0.9);
        set(State::AdRequest, State::PageView, 0.08);
        set(State::Impression, State::AdRequest, 0.5);
        set(State::Impression, State::Click, 0.01);
        set(State::Impression, State::PageView, 0.39);
        set(State::Click, State::PageView, 0.6);
        SessionModel {
            start: State::PageView,
            placements: (1..=10).map(|n| n.to_string()).collect(),
            paths: [
                String::new(),
                "/ad.json?p={placement}&uid={user}".into(),
                String::new(),
                String::new(),
            ],
            transitions,
        }
    }
}

impl SessionModel {
    /// The defaults with `path`'s settings over them.
    pub fn from_file(path: &Path) -> Result<Self, BenchError> {
        let text = std::fs::read_to_string(path).map_err(|source| BenchError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml(&text).map_err(|error| BenchError::Input {
            path: path.to_owned(),
            message: error.to_string(),
        })
    }

    /// The defaults with the TOML text's settings over them.
    pub fn from_toml(text: &str) -> Result<Self, BenchError> {
        let file: ConfigFile =
            toml::from_str(text).map_err(|error| BenchError::Session(error.to_string()))?;
        let mut model = SessionModel::default();
        if let Some(start) = file.start {
            model.start = start;
        }
        if let Some(placements) = file.placements {
            model.placements = placements;
        }
        for (state, path) in file.paths {
            if matches!(state, State::Impression | State::Click) {
                return Err(BenchError::Session(format!(
                    "paths.{}: impressions and clicks fire the signed URLs in the ad answer, \
                     so they take no path; remove this key (crates/bench/session.toml is the \
                     current template)",
                    state.name()
                )));
            }
            model.paths[state.index()] = path;
        }
        for (from, row) in file.transitions {
            model.transitions[from.index()] = [0.0; 4];
            for (to, p) in row {
                model.transitions[from.index()][to.index()] = p;
            }
        }
        model.validate()?;
        Ok(model)
    }

    fn validate(&self) -> Result<(), BenchError> {
        let fail = |message: String| Err(BenchError::Session(message));
        if self.placements.is_empty() {
            return fail("placements is empty".into());
        }
        if self.path(State::AdRequest).is_empty() {
            return fail(
                "paths.ad_request is empty; impressions and clicks need its answers".into(),
            );
        }
        for state in State::ALL {
            let path = &self.paths[state.index()];
            if !path.is_empty() && !path.starts_with('/') {
                return fail(format!("paths.{} must start with /", state.name()));
            }
            let row = &self.transitions[state.index()];
            if let Some(p) = row.iter().find(|p| !(0.0..=1.0).contains(*p)) {
                return fail(format!(
                    "transitions.{}: probability {p} is outside [0, 1]",
                    state.name()
                ));
            }
            let sum: f64 = row.iter().sum();
            if sum > 1.0 + 1e-9 {
                return fail(format!(
                    "transitions.{}: probabilities add up to {sum}, more than 1",
                    state.name()
                ));
            }
        }
        let visits = self.expected_visits()?;
        // Impressions and clicks send only after an ad request, so one of these must be reached
        // or a walk never sends anything.
        let requests: f64 = [State::PageView, State::AdRequest]
            .iter()
            .filter(|state| !self.paths[state.index()].is_empty())
            .map(|state| visits[state.index()])
            .sum();
        if requests <= 0.0 {
            return fail("no state that sends a request is ever reached".into());
        }
        Ok(())
    }

    pub fn start(&self) -> State {
        self.start
    }

    pub fn placements(&self) -> &[String] {
        &self.placements
    }

    /// The path template of `state`; empty when it sends nothing of its own (impressions and
    /// clicks: always).
    pub fn path(&self, state: State) -> &str {
        &self.paths[state.index()]
    }

    /// Expected visits to each state (in [`State::ALL`] order) in one session from the start
    /// state: solves `(I - Q)^T v = e_start` by Gaussian elimination. Fails when the exit is
    /// unreachable, since a session would then never end.
    pub fn expected_visits(&self) -> Result<[f64; 4], BenchError> {
        const N: usize = 4;
        let mut a = [[0.0; N + 1]; N];
        for (i, row) in a.iter_mut().enumerate() {
            for (j, cell) in row.iter_mut().take(N).enumerate() {
                let identity = if i == j { 1.0 } else { 0.0 };
                *cell = identity - self.transitions[j][i];
            }
            row[N] = if i == self.start.index() { 1.0 } else { 0.0 };
        }
        for column in 0..N {
            let pivot = (column..N)
                .max_by(|&x, &y| a[x][column].abs().total_cmp(&a[y][column].abs()))
                .unwrap_or(column);
            if a[pivot][column].abs() < 1e-12 {
                return Err(BenchError::Session(
                    "a session never ends: some reachable state cannot reach the exit".into(),
                ));
            }
            a.swap(column, pivot);
            let pivot_row = a[column];
            for (r, row) in a.iter_mut().enumerate() {
                if r != column {
                    let factor = row[column] / pivot_row[column];
                    for (cell, p) in row.iter_mut().zip(pivot_row).skip(column) {
                        *cell -= factor * p;
                    }
                }
            }
        }
        let mut visits = [0.0; N];
        for (i, visit) in visits.iter_mut().enumerate() {
            *visit = a[i][N] / a[i][i];
        }
        Ok(visits)
    }

    /// The state after `from`, or `None` when the session ends.
    pub fn step<R: rand::Rng>(&self, from: State, rng: &mut R) -> Option<State> {
        let mut draw: f64 = rng.random();
        for to in State::ALL {
            let p = self.transitions[from.index()][to.index()];
            if draw < p {
                return Some(to);
            }
            draw -= p;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn generated_sessions_match_the_fundamental_matrix() {
        let model = SessionModel::default();
        let expected = model.expected_visits().unwrap();
        let mut rng = SmallRng::seed_from_u64(7);
        let sessions = 20_000;
        let mut counts = [0u64; 4];
        for _ in 0..sessions {
            let mut state = Some(model.start());
            while let Some(current) = state {
                counts[current.index()] += 1;
                state = model.step(current, &mut rng);
            }
        }
        for state in State::ALL {
            let measured = counts[state.index()] as f64 / f64::from(sessions);
            let want = expected[state.index()];
            assert!(
                (measured - want).abs() <= 0.03 * want + 0.005,
                "{}: measured {measured:.4} per session, expected {want:.4}",
                state.name()
            );
        }
        // The defaults' proportions, for the docs: clicks are about 1% of impressions.
        let ratio = expected[State::Click.index()] / expected[State::Impression.index()];
        assert!((ratio - 0.01).abs() < 1e-9);
    }

    #[test]
    fn the_documented_file_is_the_default() {
        let file = SessionModel::from_toml(include_str!("../session.toml")).unwrap();
        let default = SessionModel::default();
        assert_eq!(file.start, default.start);
        assert_eq!(file.placements, default.placements);
        assert_eq!(file.paths, default.paths);
        assert_eq!(file.transitions, default.transitions);
    }

    #[test]
    fn configured_rows_replace_defaults_and_set_proportions() {
        let model = SessionModel::from_toml(
            r#"
            placements = ["top"]
            [paths]
            page_view = "/page"
            [transitions.impression]
            click = 0.5
            page_view = 0.25
            "#,
        )
        .unwrap();
        let visits = model.expected_visits().unwrap();
        let click_per_impression = visits[State::Click.index()] / visits[State::Impression.index()];
        assert!((click_per_impression - 0.5).abs() < 1e-9);
        assert_eq!(model.path(State::PageView), "/page");
        assert_eq!(model.placements(), ["top"]);
        let mut rng = SmallRng::seed_from_u64(1);
        let (mut impressions, mut clicks) = (0u32, 0u32);
        for _ in 0..40_000 {
            match model.step(State::Impression, &mut rng) {
                Some(State::Click) => clicks += 1,
                _ => impressions += 1,
            }
        }
        let share = f64::from(clicks) / f64::from(clicks + impressions);
        assert!((share - 0.5).abs() < 0.01, "click share {share}");
    }

    #[test]
    fn bad_configs_are_refused_with_the_key() {
        let too_much = SessionModel::from_toml("[transitions.click]\npage_view = 0.9\nclick = 0.2")
            .unwrap_err()
            .to_string();
        assert!(too_much.contains("transitions.click"), "{too_much}");
        let endless =
            SessionModel::from_toml("[transitions.click]\npage_view = 1.0\n[transitions.ad_request]\nimpression = 1.0\n[transitions.impression]\nclick = 1.0")
                .unwrap_err()
                .to_string();
        assert!(endless.contains("never ends"), "{endless}");
        let unknown = SessionModel::from_toml("[transitions.scroll]\nclick = 0.1")
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("scroll"), "{unknown}");
        // The old placeholder paths: beacons now come from the ad answer.
        let old = SessionModel::from_toml("[paths]\nimpression = \"/imp?placement={placement}\"")
            .unwrap_err()
            .to_string();
        assert!(old.contains("paths.impression"), "{old}");
        let no_ads = SessionModel::from_toml("[paths]\nad_request = \"\"\npage_view = \"/p\"")
            .unwrap_err()
            .to_string();
        assert!(no_ads.contains("paths.ad_request"), "{no_ads}");
    }
}
