//! Pacing on the edge: the manager's controls applied to the snapshot's [`ControlArray`], and
//! one budget [`Lease`] per line item with a goal, checked in the decision path, reserved by
//! the decisions whose impression beacon comes back to us (settled by the beacon on whichever
//! edge it lands) and charged by other billing events when they arrive. A sync task
//! ([`run_sync`]) renews the leases, reports their settlement windows and fetches the controls
//! once per interval through a [`SyncClient`] (in process in `marquee serve`).
//!
//! Invariants:
//! - Controls are keyed by line item id; they are re-applied to every snapshot swapped in, so
//!   a swap never resets a line item to full speed for longer than the gap between the swap
//!   and [`EdgePacing::attach`], and during that gap line items with a goal are held (the
//!   safe side).
//! - A line item with a goal and a per-event charge takes part in a decision only while its
//!   lease has room for one more charge before its grant expires; it starts without room.
//! - The decision path reads atomics only (one `arc-swap` load per request); the lease map's
//!   lock is taken by the sync task and by billing only during the gap after a swap.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::{ArcSwap, Guard};
use jiff::{SignedDuration, Timestamp};
use marquee_engine::{Control, ControlArray, Pacing};
use marquee_metrics::{Def, Observed, ObservedBy, ObservedCounterBy, Registry};
use marquee_model::LineItemId;
use marquee_pacing::{
    Billable, Charge, ControlEntry, EdgeId, Lease, Renewal, Settlement, SyncRequest, SyncResponse,
};
use marquee_snapshot::LineItemEntry;

use crate::Edge;
use crate::holder::{Holder, Loaded};
use crate::periodic::Schedule;

/// A failed sync; the edge keeps its controls and its leases run out.
#[derive(Debug, thiserror::Error)]
#[error("sync with the manager failed: {0}")]
pub struct SyncError(pub String);

/// How the edge reaches the manager's sync.
pub trait SyncClient: Send + Sync {
    fn sync(
        &self,
        request: SyncRequest,
    ) -> Pin<Box<dyn Future<Output = Result<SyncResponse, SyncError>> + Send + '_>>;
}

/// A budgeted line item at its position in one snapshot.
#[derive(Debug)]
struct Slot {
    lease: Arc<Lease>,
    charge: Charge,
}

/// The leases by snapshot position, for the snapshot of `version`.
#[derive(Debug, Default)]
struct Slots {
    version: Option<u64>,
    by_position: Vec<Option<Slot>>,
}

/// The edge's pacing state.
#[derive(Debug)]
pub struct EdgePacing {
    edge: EdgeId,
    /// How long the edge's tracking tokens are valid: a lease counts settlements for the
    /// decisions of that long ago.
    token_lifetime: SignedDuration,
    /// Every lease this process holds, by line item; kept across snapshots (counters are
    /// cumulative per process).
    leases: Mutex<HashMap<LineItemId, (Arc<Lease>, Charge)>>,
    /// The last control set from the manager and its version.
    controls: Mutex<(u64, HashMap<LineItemId, ControlEntry>)>,
    /// The manager process that answered last ([`SyncResponse::manager`]).
    manager: AtomicU64,
    slots: ArcSwap<Slots>,
}

/// A random edge id: a restarted edge is a new one to the lease book.
fn random_id() -> u64 {
    let mut bytes = [0u8; 8];
    // Without OS randomness, the start time still differs from the last process's.
    if getrandom::fill(&mut bytes).is_err() {
        return Timestamp::now().as_nanosecond() as u64;
    }
    u64::from_le_bytes(bytes).max(1)
}

impl EdgePacing {
    /// Pacing under a new random id (a restarted edge is a new one to the lease book), for
    /// tokens valid `token_lifetime`.
    pub fn new(token_lifetime: Duration) -> EdgePacing {
        EdgePacing {
            edge: EdgeId(random_id()),
            token_lifetime: SignedDuration::try_from(token_lifetime).unwrap_or(SignedDuration::MAX),
            leases: Mutex::new(HashMap::new()),
            controls: Mutex::new((0, HashMap::new())),
            manager: AtomicU64::new(0),
            slots: ArcSwap::from_pointee(Slots::default()),
        }
    }

    pub fn edge_id(&self) -> EdgeId {
        self.edge
    }

    /// The view the engine reads controls through for one request.
    pub fn view<'a>(&self, loaded: &'a Loaded, now: Timestamp) -> PacedControls<'a> {
        PacedControls {
            controls: &loaded.controls,
            line_items: &loaded.engine.snapshot().data.line_items,
            version: loaded.engine.snapshot().version,
            slots: self.slots.load(),
            now,
        }
    }

    /// Makes a snapshot's leases and controls current: a lease for each line item with a goal
    /// and a per-event charge (new ones without room), the stored controls applied.
    pub fn attach(&self, loaded: &Loaded) {
        let snapshot = loaded.engine.snapshot();
        let Ok(mut leases) = self.leases.lock() else {
            return;
        };
        let by_position = snapshot
            .data
            .line_items
            .iter()
            .map(|li| {
                let charge = Charge::for_goal(li.goal?.metric, &li.price)?;
                let (lease, held) = leases
                    .entry(li.id)
                    .or_insert_with(|| (self.new_lease(), charge));
                // A price change takes effect for the next charges.
                *held = charge;
                Some(Slot {
                    lease: Arc::clone(lease),
                    charge,
                })
            })
            .collect();
        drop(leases);
        if let Ok(controls) = self.controls.lock() {
            apply_controls(loaded, &controls.1, &HashMap::new());
        }
        self.slots.store(Arc::new(Slots {
            version: Some(snapshot.version),
            by_position,
        }));
    }

    /// A lease without room, its settlement windows ready now (the sync task keeps them so):
    /// a beacon may settle on it before its first sync.
    fn new_lease(&self) -> Arc<Lease> {
        let lease = Lease::new(self.token_lifetime);
        lease.prepare(Timestamp::now());
        Arc::new(lease)
    }

    /// Reserves a decision's charge on the line item's lease when its impression beacon will
    /// come back to us (its lease is charged on impressions), as the decision is made at `now`
    /// (its tokens' `issued_at`). Returns the amount reserved.
    pub fn reserve(&self, loaded: &Loaded, line_item: u64, now: Timestamp) -> Option<u64> {
        self.with_lease(loaded, LineItemId(line_item), |lease, charge| {
            (charge.on == Billable::Impression).then(|| {
                lease.reserve(charge.amount, now);
                charge.amount
            })
        })
    }

    /// Settles the reservation of an impression whose token was issued at `issued_at` (unix
    /// seconds), on whichever edge made it; returns the amount it was worth.
    pub fn settle(&self, loaded: &Loaded, line_item: u64, issued_at: i64) -> Option<u64> {
        self.with_lease(loaded, LineItemId(line_item), |lease, charge| {
            (charge.on == Billable::Impression).then(|| {
                lease.settle(charge.amount, issued_at);
                charge.amount
            })
        })
    }

    /// Charges a billing event that was not reserved at its decision to the line item's lease,
    /// if it has one charged on `on`, and returns the amount charged. `clearing_micros` is an
    /// exchange's clearing CPM (in the line item's currency) for a spend goal's billing notice;
    /// `None` charges the lease's own amount.
    pub fn bill(
        &self,
        loaded: &Loaded,
        line_item: u64,
        on: Billable,
        clearing_micros: Option<i64>,
    ) -> Option<u64> {
        let id = LineItemId(line_item);
        let data = &loaded.engine.snapshot().data;
        self.with_lease(loaded, id, |lease, charge| {
            // Only a clearing price needs the goal looked up; most events carry none. An
            // exchange's billing notice is what a spend goal's exchange bid costs whatever the
            // line item's pricing: a CPC line item pays the clearing CPM there, not per click.
            let amount = match clearing_micros {
                Some(clearing) if has_spend_goal(data, id) => {
                    u64::try_from(clearing).unwrap_or(0).div_ceil(1_000)
                }
                _ if charge.on != on => return None,
                _ => charge.amount,
            };
            lease.spend(amount);
            Some(amount)
        })
    }

    /// Runs `act` on the line item's lease and charge, if it has one.
    fn with_lease(
        &self,
        loaded: &Loaded,
        id: LineItemId,
        act: impl FnOnce(&Lease, Charge) -> Option<u64>,
    ) -> Option<u64> {
        let data = &loaded.engine.snapshot().data;
        let slots = self.slots.load();
        if slots.version == Some(loaded.engine.snapshot().version) {
            let position = data.line_items.binary_search_by_key(&id, |li| li.id);
            if let Ok(position) = position
                && let Some(Some(slot)) = slots.by_position.get(position)
            {
                return act(&slot.lease, slot.charge);
            }
        }
        // Between a swap and its attach, or a line item this snapshot no longer serves (paused
        // since its ad was shown, its late beacons and billing notices still spend): the map
        // holds every lease the manager granted.
        let found = self
            .leases
            .lock()
            .ok()
            .and_then(|leases| leases.get(&id).map(|(l, c)| (Arc::clone(l), *c)));
        let (lease, charge) = found?;
        act(&lease, charge)
    }

    /// The request for the next sync: the leases due for renewal.
    pub fn request(&self, now: Timestamp) -> SyncRequest {
        SyncRequest {
            edge: self.edge,
            control_version: self.control_version(),
            renewals: self.counts(|lease| lease.needs_renewal(now)),
            releases: Vec::new(),
            settlements: self.settlements(now),
        }
    }

    /// Readies every lease's settlement windows for `now` and collects those that changed.
    fn settlements(&self, now: Timestamp) -> Vec<Settlement> {
        let mut out = Vec::new();
        if let Ok(leases) = self.leases.lock() {
            for (id, (lease, _)) in leases.iter() {
                lease.prepare(now);
                lease.settlements(*id, &mut out);
            }
        }
        out
    }

    /// Marks every settlement window to be sent again (a sync failed, or the manager
    /// restarted).
    pub fn resend_settlements(&self) {
        if let Ok(leases) = self.leases.lock() {
            for (lease, _) in leases.values() {
                lease.resend_settlements();
            }
        }
    }

    /// The request that gives every lease back (the edge is stopping), each with its final
    /// count, so the manager returns the unused part to the budget at once.
    pub fn releases(&self) -> SyncRequest {
        SyncRequest {
            edge: self.edge,
            control_version: self.control_version(),
            renewals: Vec::new(),
            releases: self.counts(|_| true),
            settlements: self.settlements(Timestamp::now()),
        }
    }

    /// The version of the control set applied; 0 (ask for the current one) if the lock is
    /// poisoned.
    fn control_version(&self) -> u64 {
        self.controls.lock().map_or(0, |c| c.0)
    }

    /// The counts of the leases `wanted` picks, as the manager is told them.
    fn counts(&self, wanted: impl Fn(&Lease) -> bool) -> Vec<Renewal> {
        self.leases
            .lock()
            .map(|leases| {
                leases
                    .iter()
                    .filter(|(_, (lease, _))| wanted(lease))
                    .map(|(id, (lease, _))| lease.renewal(self.edge, *id))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Applies the manager's answer: grants in order, then the control set if one came, to the
    /// snapshot current once the control lock is held (so a concurrent [`attach`](Self::attach)
    /// either sees the new set or is followed by it).
    pub fn apply(&self, holder: &Holder, response: SyncResponse) {
        let previous = self.manager.swap(response.manager, Ordering::Relaxed);
        if previous != 0 && previous != response.manager {
            // A restarted manager may have missed the last counts before its state was saved.
            self.resend_settlements();
        }
        if let Ok(leases) = self.leases.lock() {
            for grant in &response.grants {
                if let Some((lease, _)) = leases.get(&grant.line_item) {
                    lease.apply(grant);
                }
            }
        }
        let Some(entries) = response.controls else {
            return;
        };
        let Ok(mut controls) = self.controls.lock() else {
            return;
        };
        let fresh: HashMap<LineItemId, ControlEntry> =
            entries.into_iter().map(|e| (e.line_item, e)).collect();
        if let Some(loaded) = holder.current() {
            apply_controls(&loaded, &fresh, &controls.1);
        }
        *controls = (response.control_version, fresh);
    }
}

/// Writes `fresh` into the snapshot's control array; line items only in `previous` go back to
/// full speed.
fn apply_controls(
    loaded: &Loaded,
    fresh: &HashMap<LineItemId, ControlEntry>,
    previous: &HashMap<LineItemId, ControlEntry>,
) {
    let line_items = &loaded.engine.snapshot().data.line_items;
    let position = |id: LineItemId| line_items.binary_search_by_key(&id, |li| li.id).ok();
    for id in previous.keys().filter(|id| !fresh.contains_key(id)) {
        if let Some(i) = position(*id) {
            let ctr_ppm = loaded.controls.control(i).ctr_ppm;
            loaded.controls.set(
                i,
                Control {
                    ctr_ppm,
                    ..Control::FULL_SPEED
                },
            );
        }
    }
    for entry in fresh.values() {
        if let Some(i) = position(entry.line_item) {
            let ctr_ppm = loaded.controls.control(i).ctr_ppm;
            loaded.controls.set(
                i,
                Control {
                    stopped: entry.stopped,
                    throttle: entry.throttle(),
                    bid_multiplier_permille: entry.bid_multiplier_permille,
                    ctr_ppm,
                },
            );
        }
    }
}

/// The engine's view of controls for one request: the manager's control, and stopped when the
/// line item's lease has no room.
#[derive(Debug)]
pub struct PacedControls<'a> {
    controls: &'a ControlArray,
    line_items: &'a [LineItemEntry],
    version: u64,
    slots: Guard<Arc<Slots>>,
    now: Timestamp,
}

impl Pacing for PacedControls<'_> {
    fn control(&self, line_item: usize) -> Control {
        let control = self.controls.control(line_item);
        if control.stopped {
            return control;
        }
        let stopped = Control {
            stopped: true,
            ..control
        };
        if self.slots.version != Some(self.version) {
            // Not attached yet: hold what may need a lease.
            let goal = self.line_items.get(line_item).and_then(|li| li.goal);
            return if goal.is_some() { stopped } else { control };
        }
        match self.slots.by_position.get(line_item) {
            Some(Some(slot)) if !slot.lease.has_room(slot.charge.amount, self.now) => stopped,
            _ => control,
        }
    }
}

/// One sync: attach a newly swapped snapshot, send the renewals due, apply the answer.
pub async fn sync_once(edge: &Edge, client: &dyn SyncClient) -> Result<(), SyncError> {
    let loaded = edge.holder.current();
    if let Some(loaded) = &loaded
        && edge.pacing.slots.load().version != Some(loaded.engine.snapshot().version)
    {
        edge.pacing.attach(loaded);
    }
    let request = edge.pacing.request(Timestamp::now());
    let response = match client.sync(request).await {
        Ok(response) => response,
        Err(error) => {
            edge.pacing.resend_settlements();
            return Err(error);
        }
    };
    edge.pacing.apply(&edge.holder, response);
    Ok(())
}

/// Syncs every `interval` until `stop`. Failures are logged; leases then expire and budgeted
/// line items stop, the rest keep their last controls.
pub async fn run_sync(
    edge: Arc<Edge>,
    client: Arc<dyn SyncClient>,
    interval: Duration,
    stop: impl Future<Output = ()>,
) {
    let mut schedule = Schedule::new(interval, stop);
    while schedule.next().await {
        if let Err(error) = sync_once(&edge, &*client).await {
            tracing::warn!(%error, "pacing sync failed");
        }
    }
}

const CONTROL_VERSION: Def = Def::new(
    "marquee_edge_pacing_control_version",
    "Version of the control set applied.",
);
const THROTTLE: Def = Def::new(
    "marquee_edge_pacing_throttle_ppm",
    "Throttle the manager set, per million.",
);
const STOPPED: Def = Def::new(
    "marquee_edge_pacing_stopped",
    "1 when the manager stopped the line item.",
);
const LEASE_CONSUMED: Def = Def::new(
    "marquee_edge_lease_consumed",
    "Billed on the line item's lease since the edge started.",
);
const LEASE_ROOM: Def = Def::new(
    "marquee_edge_lease_room",
    "1 while the lease has room for one more charge.",
);

/// The edge's pacing families, read at each scrape: the control set held and, per line item
/// with a goal, what its lease has consumed and whether it has room now.
pub(crate) fn register_metrics(registry: &mut Registry, pacing: &Arc<EdgePacing>) {
    let held = Arc::clone(pacing);
    let version = move || held.controls.lock().map_or(0, |c| c.0);
    CONTROL_VERSION.register(registry, Observed::new(version));
    let held = Arc::clone(pacing);
    let throttle = move || held.by_control(|e| i64::from(e.throttle_ppm));
    THROTTLE.register(registry, ObservedBy::new("line_item", throttle));
    let held = Arc::clone(pacing);
    let stopped = move || held.by_control(|e| i64::from(e.stopped));
    STOPPED.register(registry, ObservedBy::new("line_item", stopped));
    let held = Arc::clone(pacing);
    let consumed = move || held.by_lease(|lease, _| lease.consumed());
    LEASE_CONSUMED.register(registry, ObservedCounterBy::new("line_item", consumed));
    let held = Arc::clone(pacing);
    let room = move || {
        let now = Timestamp::now();
        held.by_lease(|lease, charge| i64::from(lease.has_room(charge.amount, now)))
    };
    LEASE_ROOM.register(registry, ObservedBy::new("line_item", room));
}

impl EdgePacing {
    /// `value` of every control held, by line item in id order (none if the lock is
    /// poisoned).
    fn by_control<N>(&self, value: impl Fn(&ControlEntry) -> N) -> Vec<(String, N)> {
        let Ok(controls) = self.controls.lock() else {
            return Vec::new();
        };
        let mut entries: Vec<&ControlEntry> = controls.1.values().collect();
        entries.sort_by_key(|e| e.line_item);
        entries
            .into_iter()
            .map(|e| (e.line_item.to_string(), value(e)))
            .collect()
    }

    /// `value` of every lease held, by line item in id order (none if the lock is poisoned).
    fn by_lease<N>(&self, value: impl Fn(&Lease, Charge) -> N) -> Vec<(String, N)> {
        let Ok(leases) = self.leases.lock() else {
            return Vec::new();
        };
        let mut held: Vec<_> = leases.iter().collect();
        held.sort_by_key(|(id, _)| **id);
        held.into_iter()
            .map(|(id, (lease, charge))| (id.to_string(), value(lease, *charge)))
            .collect()
    }
}

/// Whether line item `id` of this snapshot has a spend goal (its exchange bids' spend is their
/// billing notices' clearing price, not its own price per event).
pub fn has_spend_goal(data: &marquee_snapshot::SnapshotData, id: LineItemId) -> bool {
    data.line_item(id)
        .and_then(|li| li.goal)
        .is_some_and(|g| g.metric == marquee_model::GoalMetric::Spend)
}
