//! The write-behind queue: cap counts and budget charges that wait for the next flush
//! ([`SharedState::count_later`], [`SharedState::charge_later`]), and the flush that sends
//! them in chunks, each applied once in Redis however often it is sent. The flusher task runs
//! it every `flush_interval`; [`SharedState::drain`] and [`drain_at_exit`] run it when an
//! edge stops.

use std::sync::{Mutex, Weak};
use std::time::{Duration, Instant};

use redis::Pipeline;
use rustc_hash::FxHashMap;

use crate::breaker::BreakerState;
use crate::budgets::{Budgets, SPENT_REFRESH, sum_known};
use crate::caps::{CapCount, CapRule, Caps};
use crate::round_trip::Fallback;
use crate::state::{Inner, SharedState};

/// Counts and charges per write-behind pipeline (besides the scripts' loads): bounds how long
/// one chunk holds Redis (and the requests queued behind it on the connection) and what one
/// failure leaves to send again.
const FLUSH_CHUNK: usize = 500;

/// How long [`drain_at_exit`] waits for Redis to take what is queued.
const EXIT_DRAIN_WITHIN: Duration = Duration::from_secs(2);

/// A count that happened while Redis could not be asked, or a forced one. Its [`CapCount`] is
/// drawn before it is queued (for a decision, before its check), so every send of it adds the
/// same member at the same time.
#[derive(Debug, Clone)]
pub(crate) struct QueuedCount {
    pub(crate) user: u64,
    pub(crate) rules: Vec<CapRule>,
    pub(crate) count: CapCount,
}

/// A budget charge numbered for sending: sent as it is until a flush confirms it, and applied
/// once by the charge script whatever the number of sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Charge {
    pub(crate) line_item: u64,
    pub(crate) amount: u64,
    pub(crate) seq: u64,
}

#[derive(Debug, Default)]
struct Queue {
    counts: Vec<QueuedCount>,
    /// Budget charges summed per line item, not numbered yet.
    charges: FxHashMap<u64, u64>,
    /// Numbered charges a flush sent without confirmation, by line item: at most one each, as
    /// a line item's next charge is numbered only after its previous one is confirmed.
    unconfirmed: FxHashMap<u64, Charge>,
    /// The last number given to a charge.
    last_seq: u64,
}

/// What one flush sends.
#[derive(Debug, Default)]
struct Batch {
    counts: Vec<QueuedCount>,
    charges: Vec<Charge>,
}

impl Queue {
    /// Takes every count, the unconfirmed charges, and a newly numbered charge for each line
    /// item without one unconfirmed; the others' sums wait for the next flush.
    fn take(&mut self) -> Batch {
        let unconfirmed = &self.unconfirmed;
        let last_seq = &mut self.last_seq;
        let mut numbered = Vec::new();
        self.charges.retain(|&line_item, &mut amount| {
            if unconfirmed.contains_key(&line_item) {
                return true;
            }
            *last_seq += 1;
            numbered.push(Charge {
                line_item,
                amount,
                seq: *last_seq,
            });
            false
        });
        let mut charges: Vec<Charge> = self.unconfirmed.drain().map(|(_, c)| c).collect();
        charges.extend(numbered);
        Batch {
            counts: std::mem::take(&mut self.counts),
            charges,
        }
    }

    /// Puts back what a flush did not get confirmed, within `limit` counts: older counts first,
    /// so that the next flush sends them in the order they happened.
    fn put_back(&mut self, counts: Vec<QueuedCount>, charges: Vec<Charge>, limit: usize) -> usize {
        let room = limit.saturating_sub(self.counts.len());
        let lost = counts.len().saturating_sub(room);
        let newer = std::mem::replace(&mut self.counts, counts);
        self.counts.truncate(room);
        self.counts.extend(newer);
        for charge in charges {
            self.unconfirmed.insert(charge.line_item, charge);
        }
        lost
    }
}

/// The write-behind part of the shared state.
#[derive(Debug, Default)]
pub(crate) struct WriteBehind {
    queue: Mutex<Queue>,
    /// Held by the flush under way: a line item's charges must reach Redis one after another.
    flushing: tokio::sync::Mutex<()>,
}

impl WriteBehind {
    /// Sums `amount` into the line item's charge waiting for the next flush.
    pub(crate) fn add_charge(&self, line_item: u64, amount: u64) {
        if let Ok(mut queue) = self.queue.lock() {
            let pending = queue.charges.entry(line_item).or_default();
            *pending = pending.saturating_add(amount);
        }
    }

    /// What this process has queued for the line item's counter and not seen confirmed.
    pub(crate) fn pending_charge(&self, line_item: u64) -> Option<u64> {
        let queue = self.queue.lock().ok()?;
        sum_known(
            queue.charges.get(&line_item).copied(),
            queue.unconfirmed.get(&line_item).map(|c| c.amount),
        )
    }

    /// Counts and charges waiting for the next flush.
    pub(crate) fn len(&self) -> usize {
        self.queue.lock().map_or(0, |q| {
            q.counts.len() + q.charges.len() + q.unconfirmed.len()
        })
    }

    /// Waits for the flush under way, if any, to end: a regular flush for as long as it takes,
    /// a last one until its deadline (`None` past it).
    async fn turn(&self, round: Round) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        let flushing = self.flushing.lock();
        match round {
            Round::Regular => Some(flushing.await),
            Round::Last(deadline) => tokio::time::timeout_at(deadline.into(), flushing)
                .await
                .ok(),
        }
    }
}

/// Which flush: the flusher's, or a stopping edge's last.
#[derive(Debug, Clone, Copy)]
enum Round {
    /// Sends nothing while the breaker is not closed (Redis failing requests gets no chunks
    /// on top), and chunks for as long as they succeed.
    Regular,
    /// Sends whatever the breaker says, and nothing past the deadline.
    Last(Instant),
}

impl SharedState {
    /// Sends what is queued now (the flusher does this every `flush_interval`), in chunks of
    /// up to 500 counts and charges, each within `flush_timeout`; nothing while the breaker is
    /// not closed. Returns whether everything queued when it started was sent; what was not
    /// stays queued, and a count or charge sent again is counted once.
    pub async fn flush(&self) -> bool {
        self.inner.flush(Round::Regular).await
    }

    /// Flushes until the queue is empty or `within` has passed, whatever the breaker says (a
    /// stopping edge has no request left for it to protect). Returns whether it emptied.
    pub async fn drain(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if self.inner.flush(Round::Last(deadline)).await {
                return true;
            }
            let pause = self
                .inner
                .config
                .flush_interval
                .min(deadline.saturating_duration_since(Instant::now()));
            if pause.is_zero() {
                return false;
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// Counts and charges waiting for the next flush.
    pub fn queued(&self) -> usize {
        self.inner.write_behind.len()
    }
}

impl Inner {
    /// Queues a count for the next flush; beyond `queue_limit` it is dropped (and counted).
    pub(crate) fn queue_count(&self, count: QueuedCount) {
        let Ok(mut queue) = self.write_behind.queue.lock() else {
            return;
        };
        if queue.counts.len() >= self.config.queue_limit {
            self.counters.dropped.inc();
            return;
        }
        queue.counts.push(count);
        self.counters.queued.inc();
    }

    /// Sends the queue in chunks of at most [`FLUSH_CHUNK`] counts and charges, charges first
    /// (fewer, and money). At the first chunk that fails it stops: that chunk and the rest go
    /// back in the queue. A chunk that timed out may have run in Redis; sent again, it changes
    /// nothing there (members fixed when queued, charges applied once), and, not being a
    /// request, it never feeds the breaker. Returns whether every chunk was sent.
    async fn flush(&self, round: Round) -> bool {
        let Some(_flushing) = self.write_behind.turn(round).await else {
            return false;
        };
        let batch = match self.write_behind.queue.lock() {
            Ok(mut queue) => queue.take(),
            Err(_) => return false,
        };
        let mut counts = batch.counts.into_iter();
        let mut charges = batch.charges.into_iter();
        while let Some(chunk) = next_chunk(&mut counts, &mut charges) {
            if self.send_chunk(round, &chunk).await.is_err() {
                self.put_back(chunk, counts, charges);
                return false;
            }
        }
        true
    }

    /// Sends one chunk within the flush timeout and learns from its answers.
    async fn send_chunk(&self, round: Round, chunk: &Batch) -> Result<(), Fallback> {
        let budget = self.chunk_budget(round)?;
        let pipe = self.chunk_pipeline(chunk);
        let mut connection = self.connection.clone();
        let replies: Vec<redis::Value> = self
            .timed(budget, pipe.query_async(&mut connection))
            .await?;
        self.learn_from_replies(chunk, &replies);
        self.counters.flushed.inc_by(chunk.counts.len() as u64);
        Ok(())
    }

    /// The time one chunk may take: the flush timeout, within a last round's deadline. A
    /// regular round sends nothing while the breaker is not closed.
    fn chunk_budget(&self, round: Round) -> Result<Duration, Fallback> {
        let budget = match round {
            Round::Regular => {
                if self.breaker.state() != BreakerState::Closed {
                    return Err(self.counters.fallback(Fallback::BreakerOpen));
                }
                self.config.flush_timeout
            }
            Round::Last(deadline) => self
                .config
                .flush_timeout
                .min(deadline.saturating_duration_since(Instant::now())),
        };
        if budget.is_zero() {
            return Err(self.counters.fallback(Fallback::NoTime));
        }
        Ok(budget)
    }

    /// One chunk's pipeline: the scripts' loads (so that `EVALSHA` finds them even on a server
    /// that restarted), an `EVALSHA` of the charge script per charge, then a forced caps
    /// `EVALSHA` per count. Only the `EVALSHA`s answer, in that order.
    fn chunk_pipeline(&self, chunk: &Batch) -> Pipeline {
        let mut pipe = redis::pipe();
        if !chunk.charges.is_empty() {
            Budgets::push_script_load(&mut pipe);
        }
        if !chunk.counts.is_empty() {
            Caps::push_script_load(&mut pipe);
        }
        for charge in &chunk.charges {
            self.budgets.push_charge(&mut pipe, charge);
        }
        for count in &chunk.counts {
            self.caps.push_forced_count(&mut pipe, count);
        }
        pipe
    }

    /// Records the budget totals and the full caps a chunk's replies report.
    fn learn_from_replies(&self, chunk: &Batch, replies: &[redis::Value]) {
        let (charge_replies, cap_replies) =
            replies.split_at(chunk.charges.len().min(replies.len()));
        let totals = chunk.charges.iter().zip(charge_replies);
        self.budgets.saw(totals.filter_map(|(charge, reply)| {
            let total = redis::from_redis_value_ref::<u64>(reply).ok()?;
            Some((charge.line_item, total))
        }));
        let now_ms = self.now_ms();
        for (queued, reply) in chunk.counts.iter().zip(cap_replies) {
            if let Ok(reply) = redis::from_redis_value_ref::<Vec<i64>>(reply) {
                self.caps.learn(queued.user, &queued.rules, &reply, now_ms);
            }
        }
    }

    /// Puts a failed chunk and what was not sent after it back in the queue (counting the
    /// counts beyond `queue_limit` as dropped).
    fn put_back(
        &self,
        chunk: Batch,
        counts: impl Iterator<Item = QueuedCount>,
        charges: impl Iterator<Item = Charge>,
    ) {
        if let Ok(mut queue) = self.write_behind.queue.lock() {
            let lost = queue.put_back(
                chunk.counts.into_iter().chain(counts).collect(),
                chunk.charges.into_iter().chain(charges).collect(),
                self.config.queue_limit,
            );
            self.counters.dropped.inc_by(lost as u64);
        }
    }
}

/// The next chunk of at most [`FLUSH_CHUNK`] counts and charges, charges first; `None` when
/// both are spent.
fn next_chunk(
    counts: &mut impl Iterator<Item = QueuedCount>,
    charges: &mut impl Iterator<Item = Charge>,
) -> Option<Batch> {
    let charges: Vec<Charge> = charges.take(FLUSH_CHUNK).collect();
    let counts: Vec<QueuedCount> = counts.take(FLUSH_CHUNK - charges.len()).collect();
    if counts.is_empty() && charges.is_empty() {
        return None;
    }
    Some(Batch { counts, charges })
}

/// The flusher: a flush every `flush_interval`, and a read-back of the budget totals every
/// [`SPENT_REFRESH`]; it ends with the last clone of the state.
pub(crate) async fn flush_loop(inner: Weak<Inner>) {
    let interval = match inner.upgrade() {
        Some(inner) => inner.config.flush_interval.max(Duration::from_millis(1)),
        None => return,
    };
    let mut refreshed = Instant::now();
    loop {
        tokio::time::sleep(interval).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        inner.flush(Round::Regular).await;
        if refreshed.elapsed() >= SPENT_REFRESH {
            refreshed = Instant::now();
            inner.refresh_spent().await;
        }
    }
}

/// Sends what `shared` (an edge's, if it has one) holds queued, for a graceful stop: waits at
/// most 2 s, and logs what it could not send (lost with the process). Takes the `Option` the
/// edge holds, so that its stop calls this whether or not `[redis]` is set.
///
/// Not while the breaker is open: Redis was found down, and the connection's reconnect may be
/// a future an edge worker's runtime started, whose timers die with that runtime (polled after
/// it, they panic). The drain runs as a task of its own, so that such a panic, should a
/// reconnect begin anyway, costs the queue and not the stop.
pub async fn drain_at_exit(shared: Option<&SharedState>) {
    let Some(shared) = shared else {
        return;
    };
    let queued = shared.queued();
    if queued == 0 {
        return;
    }
    if shared.breaker_state() == BreakerState::Open {
        tracing::warn!(
            lost = queued,
            "redis: down at the stop; queued counts and charges not sent"
        );
        return;
    }
    let state = shared.clone();
    match tokio::spawn(async move { state.drain(EXIT_DRAIN_WITHIN).await }).await {
        Ok(true) => {}
        Ok(false) | Err(_) => tracing::warn!(
            lost = shared.queued(),
            "redis: queued counts and charges not sent before the stop"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(member: u64) -> QueuedCount {
        QueuedCount {
            user: 1,
            rules: Vec::new(),
            count: CapCount { member, at_ms: 0 },
        }
    }

    #[test]
    fn a_line_items_next_charge_is_numbered_only_after_the_last_is_confirmed() {
        let mut queue = Queue::default();
        queue.charges.insert(7, 300);
        queue.counts.push(count(1));
        let first = queue.take();
        assert_eq!(
            first.charges,
            [Charge {
                line_item: 7,
                amount: 300,
                seq: 1
            }]
        );
        // Unconfirmed (the flush failed): it goes back as it was, and what came meanwhile waits.
        queue.charges.insert(7, 50);
        queue.charges.insert(8, 10);
        queue.counts.push(count(2));
        assert_eq!(queue.put_back(first.counts, first.charges, 10), 0);
        let second = queue.take();
        let mut charges = second.charges.clone();
        charges.sort_by_key(|c| c.line_item);
        assert_eq!(
            charges,
            [
                Charge {
                    line_item: 7,
                    amount: 300,
                    seq: 1
                },
                Charge {
                    line_item: 8,
                    amount: 10,
                    seq: 2
                },
            ]
        );
        let members: Vec<u64> = second.counts.iter().map(|c| c.count.member).collect();
        assert_eq!(members, [1, 2], "older counts first");
        assert_eq!(queue.charges.get(&7), Some(&50));
        // Confirmed: the next flush numbers the 50.
        let third = queue.take();
        assert_eq!(
            third.charges,
            [Charge {
                line_item: 7,
                amount: 50,
                seq: 3
            }]
        );
    }

    #[test]
    fn counts_put_back_keep_within_the_limit_oldest_first() {
        let mut queue = Queue::default();
        queue.counts.push(count(9));
        let lost = queue.put_back(vec![count(1), count(2), count(3)], Vec::new(), 3);
        assert_eq!(lost, 1);
        let members: Vec<u64> = queue.counts.iter().map(|c| c.count.member).collect();
        assert_eq!(members, [1, 2, 9]);
    }
}
