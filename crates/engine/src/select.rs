//! Selection among the line items the index retrieved: status, dates, creative fit, caps,
//! pacing and floors per line item; tiers, weights and value between them; then a creative.

use marquee_model::{Format, LineItemId, Micros, PricingModel, RotationMode, Tier};
use marquee_snapshot::{Content, CreativeEntry, LineItemEntry};
use rand::Rng;

use crate::controls::Control;
use crate::{Context, Decision, Engine, Request, Scratch};

/// Why a line item did not win.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Elimination {
    /// Its targeting or placement links reject the request; names the deciding attribute.
    Targeting(String),
    /// Stopped by its control data (budget spent or held by the manager).
    Stopped,
    /// The request falls outside its flight.
    Dates,
    /// None of its creatives fits the slot's sizes and formats.
    Creative,
    /// The user reached a frequency cap of the line item or its campaign.
    FrequencyCap,
    /// Pacing left it out of this request.
    Pacing,
    /// Its bid is under the floor, or priced in another currency.
    Floor,
    /// A line item of a higher tier won.
    OutrankedByTier,
    /// Another line item of its tier was chosen.
    NotChosen,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Won,
    Eliminated(Elimination),
}

/// What happened to one line item in an explained decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub line_item: LineItemId,
    pub outcome: Outcome,
}

/// Receives eliminations; the silent one costs nothing.
pub(crate) trait Observer {
    const ACTIVE: bool;
    fn note(&mut self, line_item: u32, outcome: Outcome);
}

pub(crate) struct Silent;

impl Observer for Silent {
    const ACTIVE: bool = false;
    #[inline(always)]
    fn note(&mut self, _: u32, _: Outcome) {}
}

pub(crate) struct Recorder {
    outcomes: Vec<Option<Outcome>>,
}

impl Recorder {
    /// Starts with the targeting verdict of every line item the index did not retrieve.
    pub(crate) fn new(engine: &Engine, request: &Request<'_>, scratch: &Scratch) -> Recorder {
        let count = engine.snapshot.data.line_items.len();
        let mut retrieved = vec![false; count];
        for &i in &scratch.matched {
            retrieved[i as usize] = true;
        }
        let outcomes = (0..count)
            .map(|i| {
                if retrieved[i] {
                    return None;
                }
                let blame = engine
                    .targeting_blame(request, i)
                    .unwrap_or_else(|| "index and evaluator disagree".to_owned());
                Some(Outcome::Eliminated(Elimination::Targeting(blame)))
            })
            .collect();
        Recorder { outcomes }
    }

    pub(crate) fn finish(self, engine: &Engine) -> Vec<Verdict> {
        self.outcomes
            .into_iter()
            .zip(&engine.snapshot.data.line_items)
            .map(|(outcome, li)| Verdict {
                line_item: li.id,
                outcome: outcome.unwrap_or(Outcome::Eliminated(Elimination::NotChosen)),
            })
            .collect()
    }
}

impl Observer for Recorder {
    const ACTIVE: bool = true;
    fn note(&mut self, line_item: u32, outcome: Outcome) {
        if let Some(slot) = self.outcomes.get_mut(line_item as usize) {
            *slot = Some(outcome);
        }
    }
}

const TIERS: [Tier; 4] = [
    Tier::Sponsorship,
    Tier::Standard,
    Tier::Remnant,
    Tier::House,
];

pub(crate) fn select<R: Rng, O: Observer>(
    engine: &Engine,
    request: &Request<'_>,
    context: &mut Context<'_, R>,
    observer: &mut O,
) -> Option<Decision> {
    let matched = std::mem::take(&mut context.scratch.matched);
    let decision = select_from(engine, request, context, observer, &matched);
    context.scratch.matched = matched;
    decision
}

fn select_from<R: Rng, O: Observer>(
    engine: &Engine,
    request: &Request<'_>,
    context: &mut Context<'_, R>,
    observer: &mut O,
    matched: &[u32],
) -> Option<Decision> {
    let line_items = &engine.snapshot.data.line_items;
    let mut survivors = std::mem::take(&mut context.scratch.survivors);
    let mut decision = None;
    for tier in TIERS {
        if decision.is_some() {
            if O::ACTIVE {
                for &i in matched
                    .iter()
                    .filter(|&&i| line_items[i as usize].tier == tier)
                {
                    observer.note(i, Outcome::Eliminated(Elimination::OutrankedByTier));
                }
            }
            continue;
        }
        survivors.clear();
        for &i in matched
            .iter()
            .filter(|&&i| line_items[i as usize].tier == tier)
        {
            match check(engine, request, context, i as usize) {
                Ok(bid) => survivors.push((i, bid)),
                Err(why) => observer.note(i, Outcome::Eliminated(why)),
            }
        }
        let Some(winner) = choose(tier, &survivors, line_items, context.rng) else {
            continue;
        };
        for &(i, _) in &survivors {
            let outcome = if i == winner.0 {
                Outcome::Won
            } else {
                Outcome::Eliminated(Elimination::NotChosen)
            };
            observer.note(i, outcome);
        }
        let li = &line_items[winner.0 as usize];
        decision = pick_creative(engine, request, winner.0 as usize, context.rng).map(|creative| {
            Decision {
                line_item: li.id,
                creative: creative.id,
                tier,
                bid_cpm: winner.1,
            }
        });
    }
    context.scratch.survivors = survivors;
    decision
}

/// The per-line-item rules, in order; the bid (value as CPM times multiplier) if all pass.
fn check<R: Rng>(
    engine: &Engine,
    request: &Request<'_>,
    context: &mut Context<'_, R>,
    i: usize,
) -> Result<Micros, Elimination> {
    let data = &engine.snapshot.data;
    let li = &data.line_items[i];
    let control = context.pacing.control(i);
    if control.stopped {
        return Err(Elimination::Stopped);
    }
    let now = request.now.as_second();
    if now < li.flight_start || li.flight_end.is_some_and(|end| now >= end) {
        return Err(Elimination::Dates);
    }
    if !engine.creatives(i).any(|c| fits(c, request)) {
        return Err(Elimination::Creative);
    }
    if let Some(user) = request.user.id {
        let campaign_caps = engine.line_item_campaigns[i]
            .map(|c| data.campaigns[c as usize].frequency_caps.as_slice())
            .unwrap_or(&[]);
        let has_caps = !li.frequency_caps.is_empty() || !campaign_caps.is_empty();
        let capped = has_caps
            && !context.caps.allows(
                user,
                (li.id, &li.frequency_caps),
                (li.campaign_id, campaign_caps),
                request.now,
            );
        if capped {
            return Err(Elimination::FrequencyCap);
        }
    }
    if control.throttle < 1.0 && unit(context.rng) >= control.throttle {
        return Err(Elimination::Pacing);
    }
    let bid = scale(value_cpm(li, &control), control.bid_multiplier);
    if let Some(floor) = request.slot.floor
        && (floor.currency != li.price.currency || bid < floor.cpm)
    {
        return Err(Elimination::Floor);
    }
    Ok(bid)
}

/// What one impression of the line item is worth, as CPM in its currency. Flat-priced line
/// items are paid already, so worth nothing more per impression.
fn value_cpm(li: &LineItemEntry, control: &Control) -> Micros {
    match li.price.model {
        PricingModel::Cpm => li.price.amount_micros,
        PricingModel::Cpc => scale(li.price.amount_micros, control.ctr * 1000.0),
        PricingModel::Flat => Micros::ZERO,
    }
}

fn scale(amount: Micros, factor: f32) -> Micros {
    // Rounded to whole micros; f64 keeps amounts up to 2^53 micros exact.
    Micros((amount.0 as f64 * f64::from(factor)).round() as i64)
}

/// A uniform draw in [0, 1).
fn unit<R: Rng>(rng: &mut R) -> f32 {
    (rng.next_u32() >> 8) as f32 / (1u32 << 24) as f32
}

/// Reserved tiers (sponsorship, standard) share by weight; the others go to the highest value,
/// ties shared by weight.
fn choose<R: Rng>(
    tier: Tier,
    survivors: &[(u32, Micros)],
    line_items: &[LineItemEntry],
    rng: &mut R,
) -> Option<(u32, Micros)> {
    let best = match tier {
        Tier::Sponsorship | Tier::Standard => None,
        Tier::Remnant | Tier::House => survivors.iter().map(|s| s.1).max(),
    };
    let eligible = |s: &&(u32, Micros)| best.is_none_or(|b| s.1 == b);
    let weight = |s: &(u32, Micros)| u64::from(line_items[s.0 as usize].weight.max(1));
    let total: u64 = survivors.iter().filter(eligible).map(weight).sum();
    if total == 0 {
        return None;
    }
    let mut draw = rng.next_u64() % total;
    for survivor in survivors.iter().filter(eligible) {
        let w = weight(survivor);
        if draw < w {
            return Some(*survivor);
        }
        draw -= w;
    }
    None
}

/// The format a creative fills.
fn format_of(content: &Content) -> Format {
    match content {
        Content::Image { .. } | Content::Html { .. } | Content::ThirdPartyTag { .. } => {
            Format::Banner
        }
        Content::Native { .. } => Format::Native,
        Content::Vast { .. } => Format::Video,
    }
}

pub(crate) fn fits(creative: &CreativeEntry, request: &Request<'_>) -> bool {
    let format = format_of(&creative.content);
    if !request.formats().contains(&format) {
        return false;
    }
    if format != Format::Banner || request.slot.sizes.is_empty() {
        return true;
    }
    creative
        .size
        .is_some_and(|size| request.slot.sizes.contains(&size))
}

/// A fitting creative by the line item's rotation: evenly, or by weight.
fn pick_creative<'e, R: Rng>(
    engine: &'e Engine,
    request: &Request<'_>,
    line_item: usize,
    rng: &mut R,
) -> Option<&'e CreativeEntry> {
    let rotation = engine.snapshot.data.line_items[line_item].rotation;
    // Optimising by CTR needs measured CTRs, which the manager does not send yet: until then
    // it rotates by weight.
    let weight = |c: &CreativeEntry| match rotation {
        RotationMode::Even => 1,
        RotationMode::Weighted | RotationMode::OptimizedCtr => u64::from(c.weight.max(1)),
    };
    let total: u64 = engine
        .creatives(line_item)
        .filter(|c| fits(c, request))
        .map(weight)
        .sum();
    if total == 0 {
        return None;
    }
    let mut draw = rng.next_u64() % total;
    engine
        .creatives(line_item)
        .filter(|c| fits(c, request))
        .find(|c| {
            let w = weight(c);
            if draw < w {
                return true;
            }
            draw -= w;
            false
        })
}

impl Engine {
    /// The creatives of the line item at snapshot index `line_item`.
    pub(crate) fn creatives(&self, line_item: usize) -> impl Iterator<Item = &CreativeEntry> {
        let range = self.creative_ranges[line_item].clone();
        self.creatives_by_line_item[range.start as usize..range.end as usize]
            .iter()
            .map(|&c| &self.snapshot.data.creatives[c as usize])
    }
}
