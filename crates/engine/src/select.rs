//! Selection among the line items the index retrieved, one tier at a time: status, dates,
//! blocked advertisers and apps, creative fit, caps, pacing and price per line item; weights
//! and value between them; then a creative.

use marquee_model::{
    Channel, Currency, CurrencyRates, Format, LineItemId, Micros, PricingModel, RotationMode,
    Rounding, Size, Tier,
};
use marquee_snapshot::{Content, CreativeEntry, LineItemEntry};
use rand::Rng;

use crate::controls::Control;
use crate::index::tier_slot;
use crate::request::{
    Floor, ImageNeed, MediaRules, NativeNeeds, TextNeed, category_blocked, domain_blocked,
};
use crate::{Context, Decision, Engine, Request, Scratch};

/// Matching line items examined per tier at most. A tier with more matches is sampled: the
/// index scan starts at a random point and stops after this many, so the cost of a decision
/// stays bounded when thousands of broadly targeted line items match (exchange traffic, where
/// nothing narrows by placement). Reserved tiers still share by weight in expectation; in
/// remnant and house, the highest value of 64 random candidates is above 98% of them.
pub const MAX_CANDIDATES_PER_TIER: usize = 64;

/// Why a line item did not win.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Elimination {
    /// It does not take this kind of traffic (our tags or exchanges): see its channels.
    Channel,
    /// Exchange traffic: the imp offers none of its deals, or it has no deals and the imp is a
    /// private auction.
    Deal,
    /// Its targeting or placement links reject the request; names the deciding attribute.
    Targeting(String),
    /// Stopped by its control data (budget spent or held by the manager).
    Stopped,
    /// The request falls outside its flight.
    Dates,
    /// The request blocks its advertiser's domain (`badv`).
    BlockedAdvertiser,
    /// The request blocks the app its campaign advertises (`bapp`).
    BlockedApp,
    /// None of its creatives fits the slot's formats and sizes.
    Creative,
    /// Its video or audio creatives fit the format but not the media rules (types,
    /// duration, protocols).
    Media,
    /// Its native creatives lack an asset the imp requires, or one is too long or too small.
    Native,
    /// The imp needs https and none of its fitting creatives is https-only.
    Secure,
    /// Every fitting creative is in a blocked category (`bcat`).
    BlockedCategory,
    /// The user reached a frequency cap of the line item or its campaign.
    FrequencyCap,
    /// Pacing left it out of this request.
    Pacing,
    /// Its price or the floor cannot be converted into the bid currency (no rate).
    Currency,
    /// Its bid is under the floor (the deal's, or the imp's), or zero on an exchange.
    Floor,
    /// It matched, but its tier had more candidates than are examined and it was not among
    /// them (see [`MAX_CANDIDATES_PER_TIER`]).
    NotExamined,
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

/// Verdicts of a request's blocks per advertiser (`badv`) and campaign (`bapp`, and `bcat` on
/// the categories its creatives inherit), each stamped with the request's epoch: worked out
/// for the first candidate of an advertiser or campaign, looked up for the others.
#[derive(Debug, Default)]
pub(crate) struct BlockMemo {
    advertisers: Vec<(u32, bool)>,
    campaign_apps: Vec<(u32, bool)>,
    campaign_categories: Vec<(u32, bool)>,
}

impl BlockMemo {
    /// Forgets everything (when the epoch wraps around).
    pub(crate) fn clear(&mut self) {
        self.advertisers.clear();
        self.campaign_apps.clear();
        self.campaign_categories.clear();
    }
}

/// The verdict at `index` for this epoch, computed on first use.
fn remembered(
    memo: &mut Vec<(u32, bool)>,
    epoch: u32,
    index: usize,
    compute: impl FnOnce() -> bool,
) -> bool {
    if memo.len() <= index {
        memo.resize(index + 1, (0, false));
    }
    let slot = &mut memo[index];
    if slot.0 != epoch {
        *slot = (epoch, compute());
    }
    slot.1
}

/// A survivor's bid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bid {
    pub cpm: Micros,
    pub currency: Currency,
    /// Position of the deal in the slot's deals.
    pub deal: Option<usize>,
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
    /// Starts with the verdict of every line item that does not take part at all (channel,
    /// deals, links, targeting), evaluated naively.
    pub(crate) fn new(engine: &Engine, request: &Request<'_>) -> Recorder {
        let count = engine.snapshot.data.line_items.len();
        let outcomes = (0..count)
            .map(|i| engine.blame(request, i).map(Outcome::Eliminated))
            .collect();
        Recorder { outcomes }
    }

    /// Line items that matched but were never examined lost to a higher tier's winner, or were
    /// left out by the candidate cap.
    pub(crate) fn finish(self, engine: &Engine, winning_tier: Option<Tier>) -> Vec<Verdict> {
        self.outcomes
            .into_iter()
            .zip(&engine.snapshot.data.line_items)
            .map(|(outcome, li)| Verdict {
                line_item: li.id,
                outcome: outcome.unwrap_or_else(|| {
                    let outranked = winning_tier.is_some_and(|winner| li.tier < winner);
                    Outcome::Eliminated(if outranked {
                        Elimination::OutrankedByTier
                    } else {
                        Elimination::NotExamined
                    })
                }),
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

/// Matches and checks one tier at a time, highest first, and stops at the first tier with a
/// survivor: its winner takes the request.
pub(crate) fn select<R: Rng, O: Observer>(
    engine: &Engine,
    request: &Request<'_>,
    context: &mut Context<'_, R>,
    observer: &mut O,
) -> Option<Decision> {
    let ctx = engine.match_context(request);
    engine.index.begin(&ctx, context.scratch);
    let line_items = &engine.snapshot.data.line_items;
    let mut decision = None;
    for tier in TIERS {
        let draw = context.rng.next_u64();
        context.scratch.matched.clear();
        engine.index.match_tier(
            &ctx,
            context.scratch,
            tier_slot(tier),
            MAX_CANDIDATES_PER_TIER,
            draw,
        );
        let candidates = std::mem::take(&mut context.scratch.matched);
        let winner = if O::ACTIVE {
            check_all_and_choose(engine, request, context, tier, &candidates, observer)
        } else {
            draw_until_one_passes(engine, request, context, tier, &candidates)
        };
        context.scratch.matched = candidates;
        let Some((winner, bid)) = winner else {
            continue;
        };
        let li = &line_items[winner as usize];
        decision = pick_creative(
            engine,
            request,
            context.scratch,
            winner as usize,
            context.rng,
        )
        .map(|creative| Decision {
            line_item: li.id,
            creative: creative.id,
            tier,
            bid_cpm: bid.cpm,
            currency: bid.currency,
            deal: bid.deal,
            format: creative.format,
            size: creative.size,
        });
        break;
    }
    decision
}

/// Explained decisions check every candidate, to give each its verdict, then [`choose`].
fn check_all_and_choose<R: Rng, O: Observer>(
    engine: &Engine,
    request: &Request<'_>,
    context: &mut Context<'_, R>,
    tier: Tier,
    candidates: &[u32],
    observer: &mut O,
) -> Option<(u32, Bid)> {
    let mut survivors = std::mem::take(&mut context.scratch.survivors);
    survivors.clear();
    for &i in candidates {
        match check(engine, request, context, i as usize) {
            Ok(bid) => survivors.push((i, bid)),
            Err(why) => observer.note(i, Outcome::Eliminated(why)),
        }
    }
    let line_items = &engine.snapshot.data.line_items;
    let winner = choose(
        tier,
        &survivors,
        line_items,
        |bid| rank(request, context.rates, bid.cpm, bid.currency),
        context.rng,
    );
    if let Some((won, _)) = winner {
        for &(i, _) in &survivors {
            let outcome = if i == won {
                Outcome::Won
            } else {
                Outcome::Eliminated(Elimination::NotChosen)
            };
            observer.note(i, outcome);
        }
    }
    context.scratch.survivors = survivors;
    winner
}

/// Whether the tier's winner is the highest bid (ties shared by weight); see [`choose`].
fn goes_to_highest_bid(tier: Tier) -> bool {
    matches!(tier, Tier::Remnant | Tier::House)
}

/// The winner [`choose`] would draw among the survivors, found without checking every
/// candidate: candidates are drawn by weight without replacement (in tiers that go to the
/// highest bid, among the highest bids left), and the first to pass [`check`] wins. In such an
/// order the first survivor is each survivor with probability its weight over the survivors'
/// total weight, just as `choose` draws it, and no lower bid is checked once a higher one
/// passed. On exchange traffic, where 64 candidates match, this checks a few instead of all.
fn draw_until_one_passes<R: Rng>(
    engine: &Engine,
    request: &Request<'_>,
    context: &mut Context<'_, R>,
    tier: Tier,
    candidates: &[u32],
) -> Option<(u32, Bid)> {
    let line_items = &engine.snapshot.data.line_items;
    let weight = |i: u32| u64::from(line_items[i as usize].weight.max(1));
    let mut ranked = std::mem::take(&mut context.scratch.ranked);
    ranked.clear();
    if goes_to_highest_bid(tier) {
        for &i in candidates {
            let control = context.pacing.control(i as usize);
            // One that cannot bid would fail `check` anyway.
            if control.stopped {
                continue;
            }
            let li = &line_items[i as usize];
            if let Ok((cpm, currency)) = bid_cpm(request, context.rates, li, &control) {
                ranked.push((rank(request, context.rates, cpm, currency), i));
            }
        }
        ranked.sort_unstable_by_key(|&(rank, _)| std::cmp::Reverse(rank));
    } else {
        ranked.extend(candidates.iter().map(|&i| (Rank::EVEN, i)));
    }
    let mut winner = None;
    let mut rest = ranked.as_mut_slice();
    'bids: while let Some(&(best, _)) = rest.first() {
        let tied = rest.iter().take_while(|r| r.0 == best).count();
        let (group, lower) = rest.split_at_mut(tied);
        for left in (1..=group.len()).rev() {
            let undrawn = group[..left].iter().map(|&(_, i)| i).enumerate();
            let Some((pick, _)) = draw_by_weight(undrawn, |(_, i)| weight(i), context.rng) else {
                break;
            };
            // Drawn ones move past the end of what is left.
            group.swap(pick, left - 1);
            let i = group[left - 1].1;
            if let Ok(bid) = check(engine, request, context, i as usize) {
                winner = Some((i, bid));
                break 'bids;
            }
        }
        rest = lower;
    }
    context.scratch.ranked = ranked;
    winner
}

/// The per-line-item rules, in order; the bid if all pass.
fn check<R: Rng>(
    engine: &Engine,
    request: &Request<'_>,
    context: &mut Context<'_, R>,
    i: usize,
) -> Result<Bid, Elimination> {
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
    blocked_by_request(engine, request, context.scratch, i)?;
    best_creative_fit(engine, request, context.scratch, i)?;
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
    price(request, context.rates, li, &control)
}

/// The request's blocks that apply to the whole line item: its advertiser's domains (`badv`)
/// and its campaign's app (`bapp`).
fn blocked_by_request(
    engine: &Engine,
    request: &Request<'_>,
    scratch: &mut Scratch,
    i: usize,
) -> Result<(), Elimination> {
    let data = &engine.snapshot.data;
    let blocked = &request.blocked;
    let epoch = scratch.epoch();
    // An advertiser without domains would bid without `adomain`: under a `badv` list nothing
    // shows it is allowed, and exchanges drop such bids, so it counts as blocked.
    if !blocked.advertisers.is_empty()
        && engine.line_item_advertisers[i].is_none_or(|advertiser| {
            remembered(
                &mut scratch.blocks.advertisers,
                epoch,
                advertiser as usize,
                || {
                    let domains = &data.advertisers[advertiser as usize].domains;
                    domains.is_empty()
                        || domains.iter().any(|domain| {
                            blocked
                                .advertisers
                                .iter()
                                .any(|b| domain_blocked(domain, b))
                        })
                },
            )
        })
    {
        return Err(Elimination::BlockedAdvertiser);
    }
    if !blocked.apps.is_empty()
        && let Some(campaign) = engine.line_item_campaigns[i]
        && remembered(
            &mut scratch.blocks.campaign_apps,
            epoch,
            campaign as usize,
            || {
                data.campaigns[campaign as usize]
                    .app_bundle
                    .as_ref()
                    .is_some_and(|bundle| blocked.apps.iter().any(|app| app == bundle))
            },
        )
    {
        return Err(Elimination::BlockedApp);
    }
    Ok(())
}

/// Ok if some creative of the line item may serve; otherwise the reason of the creative that
/// came furthest through [`creative_fit`]'s checks.
fn best_creative_fit(
    engine: &Engine,
    request: &Request<'_>,
    scratch: &mut Scratch,
    i: usize,
) -> Result<(), Elimination> {
    let mut furthest: Option<Elimination> = None;
    let mut inherited_blocked = || engine.campaign_categories_blocked(request, scratch, i);
    for (creative, _) in engine.creatives(i, request.now.as_second()) {
        match creative_fit(creative, request, &mut inherited_blocked) {
            Ok(()) => return Ok(()),
            Err(why) => {
                if furthest
                    .as_ref()
                    .is_none_or(|f| creative_stage(&why) > creative_stage(f))
                {
                    furthest = Some(why);
                }
            }
        }
    }
    Err(furthest.unwrap_or(Elimination::Creative))
}

/// How far a creative got before failing, for [`best_creative_fit`].
fn creative_stage(why: &Elimination) -> u8 {
    match why {
        Elimination::Media | Elimination::Native => 1,
        Elimination::Secure => 2,
        Elimination::BlockedCategory => 3,
        _ => 0,
    }
}

/// Whether a creative may fill the slot, checked in order: format and size, media rules or
/// native assets, https, blocked categories (its own, or else its campaign's, which
/// `inherited_blocked` answers).
fn creative_fit(
    creative: &CreativeEntry,
    request: &Request<'_>,
    inherited_blocked: &mut impl FnMut() -> bool,
) -> Result<(), Elimination> {
    let slot = &request.slot;
    if !request.formats().contains(&creative.format) {
        return Err(Elimination::Creative);
    }
    let content = &creative.content;
    match creative.format {
        Format::Banner => {
            let sized = if slot.sizes.is_empty() {
                match (slot.max_size, creative.size) {
                    (Some(max), Some(size)) => size.w <= max.w && size.h <= max.h,
                    _ => true,
                }
            } else {
                creative.size.is_some_and(|size| slot.sizes.contains(&size))
            };
            if !sized {
                return Err(Elimination::Creative);
            }
        }
        Format::Video if !media_fits(content, &slot.video) => return Err(Elimination::Media),
        Format::Audio if !media_fits(content, &slot.audio) => return Err(Elimination::Media),
        Format::Native if !native_fits(content, &slot.native) => return Err(Elimination::Native),
        Format::Video | Format::Audio | Format::Native => {}
    }
    if slot.secure && !creative.secure {
        return Err(Elimination::Secure);
    }
    let blocked = request.blocked.categories;
    if blocked.is_empty() {
        return Ok(());
    }
    let category_blocked = if creative.categories.is_empty() {
        inherited_blocked()
    } else {
        any_category_blocked(&creative.categories, blocked)
    };
    if category_blocked {
        return Err(Elimination::BlockedCategory);
    }
    Ok(())
}

fn any_category_blocked(categories: &[String], blocked: &[&str]) -> bool {
    categories
        .iter()
        .any(|category| blocked.iter().any(|b| category_blocked(category, b)))
}

fn media_fits(content: &Content, rules: &MediaRules<'_>) -> bool {
    let Content::Vast {
        duration_secs,
        mimes,
        protocols,
        ..
    } = content
    else {
        return false;
    };
    let mime = rules.mimes.is_empty()
        || mimes
            .iter()
            .any(|m| rules.mimes.iter().any(|r| r.eq_ignore_ascii_case(m)));
    let duration = if rules.durations.is_empty() {
        rules.min_duration.is_none_or(|min| *duration_secs >= min)
            && rules.max_duration.is_none_or(|max| *duration_secs <= max)
    } else {
        rules.durations.contains(duration_secs)
    };
    let protocol =
        rules.protocols.is_empty() || protocols.iter().any(|p| rules.protocols.contains(p));
    mime && duration && protocol
}

fn native_fits(content: &Content, needs: &NativeNeeds) -> bool {
    let Content::Native(native) = content else {
        return false;
    };
    has_text(Some(&native.title), needs.title)
        && has_text(Some(&native.body), needs.body)
        && has_text(Some(&native.sponsored_by), needs.sponsored_by)
        && has_text(native.call_to_action.as_ref(), needs.call_to_action)
        && has_image(
            native.image_url.is_some(),
            native.image_size,
            needs.main_image,
        )
        && has_image(native.icon_url.is_some(), native.icon_size, needs.icon)
}

fn has_text(text: Option<&String>, need: Option<TextNeed>) -> bool {
    let Some(need) = need else {
        return true;
    };
    text.filter(|t| !t.is_empty()).is_some_and(|t| {
        need.max_chars
            .is_none_or(|max| t.chars().count() <= max as usize)
    })
}

fn has_image(present: bool, size: Option<Size>, need: Option<ImageNeed>) -> bool {
    let Some(need) = need else {
        return true;
    };
    let any_size = need.min_w == 0 && need.min_h == 0;
    present && (any_size || size.is_some_and(|s| s.w >= need.min_w && s.h >= need.min_h))
}

/// The bid in the request's currency, for the deal it is made on. A line item with deals bids
/// on the first offered deal of its own whose floor (the deal's, else the imp's) it meets;
/// one without deals bids against the imp's floor.
fn price(
    request: &Request<'_>,
    rates: &marquee_model::CurrencyRates,
    li: &LineItemEntry,
    control: &Control,
) -> Result<Bid, Elimination> {
    let value = line_item_value(li, control);
    let (cpm, currency) = bid_cpm(request, rates, li, control)?;
    let exchange = request.channel == Channel::Exchange;
    if exchange && cpm <= Micros::ZERO {
        return Err(Elimination::Floor);
    }
    // The bid meeting `floor`, or why not. Whether it is met is decided in the line item's
    // currency, where its value is exact: a line item priced at a deal's price in the deal's
    // currency meets it, although its value and the floor converted into a third bid currency
    // could fall a micro apart. A bid that meets it is at least the floor converted into the bid
    // currency rounded up (a micro above its own conversion at most), so that the exchange's
    // check, and ours, find it at or above the floor.
    let meeting = |floor: Option<Floor>| -> Result<Micros, Elimination> {
        let Some(floor) = floor else {
            return Ok(cpm);
        };
        let in_line_item_currency = rates
            .convert(floor.cpm, floor.currency, li.price.currency, Rounding::Up)
            .ok_or(Elimination::Currency)?;
        if value < in_line_item_currency {
            return Err(Elimination::Floor);
        }
        let in_bid_currency = rates
            .convert(floor.cpm, floor.currency, currency, Rounding::Up)
            .ok_or(Elimination::Currency)?;
        Ok(cpm.max(in_bid_currency))
    };
    let slot = &request.slot;
    if !exchange || li.deals.is_empty() {
        return Ok(Bid {
            cpm: meeting(slot.floor)?,
            currency,
            deal: None,
        });
    }
    let mut why = Elimination::Deal;
    for (position, offered) in slot.deals.iter().enumerate() {
        if !li.deals.iter().any(|d| d == offered.id) {
            continue;
        }
        match meeting(offered.floor.or(slot.floor)) {
            Ok(cpm) => {
                return Ok(Bid {
                    cpm,
                    currency,
                    deal: Some(position),
                });
            }
            Err(e) => why = e,
        }
    }
    Err(why)
}

/// What the line item offers, as CPM in its own currency: its value with the pacing
/// multiplier.
fn line_item_value(li: &LineItemEntry, control: &Control) -> Micros {
    permille(value_cpm(li, control), control.bid_multiplier_permille)
}

/// What the line item bids before floors and deals: [`line_item_value`] in the bid currency.
fn bid_cpm(
    request: &Request<'_>,
    rates: &marquee_model::CurrencyRates,
    li: &LineItemEntry,
    control: &Control,
) -> Result<(Micros, Currency), Elimination> {
    let value = line_item_value(li, control);
    let currency = request.bid_currency.unwrap_or(li.price.currency);
    let cpm = rates
        .convert(value, li.price.currency, currency, Rounding::Down)
        .ok_or(Elimination::Currency)?;
    Ok((cpm, currency))
}

/// What one impression of the line item is worth, as CPM in its currency: the CPM price, or
/// the CPC price times the expected CTR times 1000. Flat-priced line items are paid already,
/// so worth nothing more per impression.
fn value_cpm(li: &LineItemEntry, control: &Control) -> Micros {
    match li.price.model {
        PricingModel::Cpm => li.price.amount_micros,
        // price × (ctr_ppm / 10^6) × 1000
        PricingModel::Cpc => ratio(li.price.amount_micros, control.ctr_ppm, 1_000),
        PricingModel::Flat => Micros::ZERO,
    }
}

/// `amount` × `permille` / 1000, rounded down.
fn permille(amount: Micros, permille: u32) -> Micros {
    ratio(amount, permille, 1_000)
}

/// `amount` × `numerator` / `denominator`, rounded down, saturating. In 64 bits when the
/// product fits (always, for prices of this world), else in 128.
fn ratio(amount: Micros, numerator: u32, denominator: i64) -> Micros {
    if let Some(product) = amount.0.checked_mul(i64::from(numerator)) {
        return Micros(product.div_euclid(denominator));
    }
    let exact = (i128::from(amount.0) * i128::from(numerator)).div_euclid(i128::from(denominator));
    Micros(i64::try_from(exact).unwrap_or(if exact < 0 { i64::MIN } else { i64::MAX }))
}

/// A uniform draw in [0, 1).
fn unit<R: Rng>(rng: &mut R) -> f32 {
    (rng.next_u32() >> 8) as f32 / (1u32 << 24) as f32
}

/// A bid's place in a tier that goes to the highest bid (higher is better).
///
/// A bid request names the currency every bid is in, so bids compare as written. An ad
/// request names none and each line item bids in its own price currency: bids compare in
/// the rate table's base currency (`[currency]`), and a bid whose currency has no rate cannot
/// be compared, so it ranks below every bid that can (such bids compare among themselves as
/// written). An install with one currency converts nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Rank {
    comparable: bool,
    cpm: Micros,
}

impl Rank {
    /// Every candidate of a reserved tier, where bids do not order the draw.
    const EVEN: Rank = Rank {
        comparable: true,
        cpm: Micros::ZERO,
    };
}

fn rank(request: &Request<'_>, rates: &CurrencyRates, cpm: Micros, currency: Currency) -> Rank {
    if request.bid_currency.is_some() || currency == rates.base() {
        return Rank {
            comparable: true,
            cpm,
        };
    }
    match rates.convert(cpm, currency, rates.base(), Rounding::Down) {
        Some(base) => Rank {
            comparable: true,
            cpm: base,
        },
        None => Rank {
            comparable: false,
            cpm,
        },
    }
}

/// Reserved tiers (sponsorship, standard) share by weight; the others go to the highest bid
/// (by `rank`), ties shared by weight.
fn choose<R: Rng>(
    tier: Tier,
    survivors: &[(u32, Bid)],
    line_items: &[LineItemEntry],
    rank: impl Fn(&Bid) -> Rank,
    rng: &mut R,
) -> Option<(u32, Bid)> {
    let best = if goes_to_highest_bid(tier) {
        survivors.iter().map(|s| rank(&s.1)).max()
    } else {
        None
    };
    let eligible = survivors
        .iter()
        .filter(|s| best.is_none_or(|b| rank(&s.1) == b));
    let weight = |s: &(u32, Bid)| u64::from(line_items[s.0 as usize].weight.max(1));
    draw_by_weight(eligible, weight, rng).copied()
}

/// One of `items`, each with probability its weight over their total; `None` when that is 0.
fn draw_by_weight<T: Copy, R: Rng>(
    items: impl Iterator<Item = T> + Clone,
    weight: impl Fn(T) -> u64,
    rng: &mut R,
) -> Option<T> {
    let total: u64 = items.clone().map(&weight).sum();
    if total == 0 {
        return None;
    }
    let mut draw = rng.next_u64() % total;
    for item in items {
        let w = weight(item);
        if draw < w {
            return Some(item);
        }
        draw -= w;
    }
    None
}

/// A creative that may serve, by the line item's rotation: evenly, or by weight.
fn pick_creative<'e, R: Rng>(
    engine: &'e Engine,
    request: &Request<'_>,
    scratch: &mut Scratch,
    line_item: usize,
    rng: &mut R,
) -> Option<&'e CreativeEntry> {
    let rotation = engine.snapshot.data.line_items[line_item].rotation;
    // Optimising by CTR needs measured CTRs, which the manager does not send yet: until then
    // it rotates by weight.
    // The weight of the creative's use by this line item: its own for a creative uploaded
    // under it, the assignment's for one from the library.
    let weight = |&(_, w): &(&CreativeEntry, u32)| match rotation {
        RotationMode::Even => 1,
        RotationMode::Weighted | RotationMode::OptimizedCtr => u64::from(w.max(1)),
    };
    let mut inherited_blocked = || engine.campaign_categories_blocked(request, scratch, line_item);
    let mut fits =
        |(c, _): &(&CreativeEntry, u32)| creative_fit(c, request, &mut inherited_blocked).is_ok();
    let now = request.now.as_second();
    let total: u64 = engine
        .creatives(line_item, now)
        .filter(&mut fits)
        .map(|u| weight(&u))
        .sum();
    if total == 0 {
        return None;
    }
    let mut draw = rng.next_u64() % total;
    engine
        .creatives(line_item, now)
        .filter(fits)
        .find(|u| {
            let w = weight(u);
            if draw < w {
                return true;
            }
            draw -= w;
            false
        })
        .map(|(c, _)| c)
}

impl Engine {
    /// Whether the request blocks a category of the line item's campaign, which its creatives
    /// without categories of their own inherit; worked out once per request and campaign.
    /// Called only under a `bcat` list: a campaign without categories leaves such creatives
    /// with none to declare, so they count as blocked (the bid would name no `cat`).
    fn campaign_categories_blocked(
        &self,
        request: &Request<'_>,
        scratch: &mut Scratch,
        line_item: usize,
    ) -> bool {
        let Some(campaign) = self.line_item_campaigns[line_item] else {
            return true;
        };
        let epoch = scratch.epoch();
        remembered(
            &mut scratch.blocks.campaign_categories,
            epoch,
            campaign as usize,
            || {
                let categories = &self.snapshot.data.campaigns[campaign as usize].categories;
                categories.is_empty()
                    || any_category_blocked(categories, request.blocked.categories)
            },
        )
    }

    /// The creatives the line item at snapshot index `line_item` may serve at `now` (unix
    /// seconds), each with its weight there.
    pub(crate) fn creatives(
        &self,
        line_item: usize,
        now: i64,
    ) -> impl Iterator<Item = (&CreativeEntry, u32)> {
        let range = self.creative_ranges[line_item].clone();
        self.creatives_by_line_item[range.start as usize..range.end as usize]
            .iter()
            .filter(move |u| u.start <= now && now < u.end)
            .map(|u| (&self.snapshot.data.creatives[u.creative as usize], u.weight))
    }
}
