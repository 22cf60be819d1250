//! Budget counters in Redis: a line item's shared total of its goal metric, all edges
//! together. Charged within a limit on the request path ([`SharedState::charge_within`],
//! [`BUDGET_SCRIPT`]) or queued ([`SharedState::charge_later`]) and applied once by the
//! flush ([`CHARGE_SCRIPT`]); the totals last seen answer [`SharedState::spent`] and are read
//! back every second.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::{Pipeline, Script};
use rustc_hash::FxHashMap;

use crate::keys;
use crate::round_trip::Fallback;
use crate::state::{Inner, SharedState, process_random};
use crate::write_behind::Charge;

/// Charge within a limit: `ARGV`: amount, limit. Adds the amount only if the total stays
/// within the limit. Returns `{charged, total}`.
const BUDGET_SCRIPT: &str = r"
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
local amount = tonumber(ARGV[1])
if spent + amount > tonumber(ARGV[2]) then
  return { 0, spent }
end
return { 1, redis.call('INCRBY', KEYS[1], amount) }
";

/// A queued charge, applied once however often it is sent. `KEYS`: the budget counter, this
/// process's mark for it (the sequence number of the last charge it applied there). `ARGV`:
/// amount, the charge's sequence number, the mark's lifetime (ms). A process numbers a line
/// item's next charge only once the previous one is confirmed, so its charges reach a counter
/// in increasing order and one not above the mark was applied already. Returns the total.
const CHARGE_SCRIPT: &str = r"
if tonumber(ARGV[2]) > tonumber(redis.call('GET', KEYS[2]) or '0') then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  return redis.call('INCRBY', KEYS[1], ARGV[1])
end
return tonumber(redis.call('GET', KEYS[1]) or '0')
";

/// How long a process's mark of the last charge it applied to a line item's counter
/// ([`CHARGE_SCRIPT`]) outlives that charge. A charge is resent until a flush confirms it, so
/// only one applied and then left unconfirmed by an outage longer than this would count twice;
/// the marks number at most edges × line items charged within it.
const CHARGE_MARK_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// How often an edge reads back the shared budget counters it knows, so that
/// `marquee_redis_budget_spent` follows what other edges charge after this one stopped.
pub(crate) const SPENT_REFRESH: Duration = Duration::from_secs(1);

/// The answer of [`SharedState::charge_within`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetAnswer {
    /// Charged; the total after it.
    Charged(u64),
    /// The charge would pass the limit; the total as it is.
    Refused(u64),
    Unavailable(Fallback),
}

/// The budgets' part of the shared state.
#[derive(Debug)]
pub(crate) struct Budgets {
    within_limit_script: Script,
    charge_script: Script,
    /// The last shared total seen per line item's budget counter.
    seen: Mutex<FxHashMap<u64, u64>>,
    /// This process's name in its charge marks ([`CHARGE_SCRIPT`]), random: a restarted
    /// process numbers its charges from 1 again under a new name.
    writer: u64,
}

impl Budgets {
    pub(crate) fn new() -> Budgets {
        Budgets {
            within_limit_script: Script::new(BUDGET_SCRIPT),
            charge_script: Script::new(CHARGE_SCRIPT),
            seen: Mutex::new(FxHashMap::default()),
            writer: process_random(),
        }
    }

    /// Records the shared totals Redis reported, by line item.
    pub(crate) fn saw(&self, totals: impl IntoIterator<Item = (u64, u64)>) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.extend(totals);
        }
    }

    fn last_seen(&self, line_item: u64) -> Option<u64> {
        self.seen
            .lock()
            .ok()
            .and_then(|seen| seen.get(&line_item).copied())
    }

    /// Every (line item, total) seen, sorted by line item.
    pub(crate) fn totals_seen(&self) -> Vec<(u64, u64)> {
        let mut totals: Vec<(u64, u64)> = self
            .seen
            .lock()
            .map(|seen| seen.iter().map(|(l, t)| (*l, *t)).collect())
            .unwrap_or_default();
        totals.sort_unstable();
        totals
    }

    /// Adds the charge script's load to a flush's pipeline, so that its `EVALSHA`s find it
    /// even on a server that restarted.
    pub(crate) fn push_script_load(pipe: &mut Pipeline) {
        pipe.cmd("SCRIPT").arg("LOAD").arg(CHARGE_SCRIPT).ignore();
    }

    /// Adds a queued charge to a flush's pipeline: one `EVALSHA` of [`CHARGE_SCRIPT`], whose
    /// reply is the counter's total.
    pub(crate) fn push_charge(&self, pipe: &mut Pipeline, charge: &Charge) {
        let mark_ms = u64::try_from(CHARGE_MARK_LIFETIME.as_millis()).unwrap_or(u64::MAX);
        pipe.cmd("EVALSHA")
            .arg(self.charge_script.get_hash())
            .arg(2)
            .arg(keys::budget_key(charge.line_item))
            .arg(keys::charge_mark_key(charge.line_item, self.writer))
            .arg(charge.amount)
            .arg(charge.seq)
            .arg(mark_ms);
    }
}

impl SharedState {
    /// Adds `amount` to the line item's shared budget counter with the next flush (summed
    /// with other charges queued meanwhile).
    pub fn charge_later(&self, line_item: u64, amount: u64) {
        if amount == 0 {
            return;
        }
        self.inner.write_behind.add_charge(line_item, amount);
    }

    /// The line item's shared total as last seen (from a flush or a [`charge_within`]) plus
    /// what this process has queued since; `None` before anything was seen or queued.
    ///
    /// [`charge_within`]: SharedState::charge_within
    pub fn spent(&self, line_item: u64) -> Option<u64> {
        let seen = self.inner.budgets.last_seen(line_item);
        let queued = self.inner.write_behind.pending_charge(line_item);
        sum_known(seen, queued)
    }

    /// Charges `amount` to the line item's shared counter only if its total stays within
    /// `limit`: one atomic round trip within `deadline`.
    pub async fn charge_within(
        &self,
        line_item: u64,
        amount: u64,
        limit: u64,
        deadline: Instant,
    ) -> BudgetAnswer {
        match self
            .inner
            .run_charge_within(line_item, amount, limit, deadline)
            .await
        {
            Ok((charged, total)) => {
                self.inner.budgets.saw([(line_item, total)]);
                if charged == 1 {
                    BudgetAnswer::Charged(total)
                } else {
                    BudgetAnswer::Refused(total)
                }
            }
            Err(fallback) => BudgetAnswer::Unavailable(fallback),
        }
    }
}

impl Inner {
    /// [`BUDGET_SCRIPT`]'s round trip: its reply, `{charged, total}`.
    async fn run_charge_within(
        &self,
        line_item: u64,
        amount: u64,
        limit: u64,
        deadline: Instant,
    ) -> Result<(u8, u64), Fallback> {
        let mut invocation = self
            .budgets
            .within_limit_script
            .key(keys::budget_key(line_item));
        invocation.arg(amount).arg(limit);
        let mut connection = self.connection.clone();
        self.round_trip(deadline, invocation.invoke_async(&mut connection))
            .await
    }

    /// Reads the shared total of every line item this process has seen charged (one pipelined
    /// round trip), so the figure it reports stays true when it no longer charges them itself.
    pub(crate) async fn refresh_spent(&self) {
        let line_items: Vec<u64> = match self.budgets.seen.lock() {
            Ok(seen) => seen.keys().copied().collect(),
            Err(_) => return,
        };
        if line_items.is_empty() {
            return;
        }
        let mut pipeline = redis::pipe();
        for line_item in &line_items {
            pipeline.cmd("GET").arg(keys::budget_key(*line_item));
        }
        let mut connection = self.connection.clone();
        let deadline = Instant::now() + self.config.flush_timeout;
        let totals: Result<Vec<Option<u64>>, Fallback> = self
            .round_trip(deadline, pipeline.query_async(&mut connection))
            .await;
        let Ok(totals) = totals else {
            return;
        };
        let known = line_items.into_iter().zip(totals);
        self.budgets
            .saw(known.filter_map(|(line_item, total)| Some((line_item, total?))));
    }
}

/// The sum of the parts known; `None` when none is.
pub(crate) fn sum_known(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}
