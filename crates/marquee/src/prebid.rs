//! `marquee prebid create-set`: the API's Prebid line item set generator from the command line
//! (`marquee_api::prebid`), as the `cli` actor. Glue only: the arguments become the request
//! body the API reads, with the same checks and answer.

use clap::{Args, Subcommand};
use marquee_store::Actor;
use serde_json::{Map, Value, json};

use crate::{CommonArgs, Failure, open_admin_store};

#[derive(Debug, Subcommand)]
pub(crate) enum PrebidCommand {
    /// Make the price-priority line items of a Prebid.js price granularity under a campaign:
    /// one per bucket, targeting hb_pb at a CPM of the bucket, each with a Prebid creative per
    /// size. Idempotent: what exists already is kept (docs/header-bidding.md).
    CreateSet(CreateSetArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CreateSetArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The campaign (order) the line items go under.
    #[arg(long, value_name = "ID")]
    campaign: u64,
    /// low, medium, high, auto or dense; or custom ranges as JSON:
    /// '{"ranges":[{"max":"5","increment":"0.05"}],"precision":2}'.
    #[arg(long, value_name = "NAME|JSON")]
    granularity: String,
    /// A placement to link every line item to (repeat for more); none: every placement.
    #[arg(long = "placement", value_name = "ID")]
    placements: Vec<u64>,
    /// A creative size, WIDTHxHEIGHT (repeat for more).
    #[arg(long = "size", value_name = "WxH", required = true)]
    sizes: Vec<String>,
    /// Where a click on the creative's own frame goes.
    #[arg(long, value_name = "URL")]
    landing_url: String,
    /// Local start of the flight, e.g. 2026-12-01T00:00:00.
    #[arg(long)]
    start: String,
    /// Local end of the flight (exclusive); none: open-ended.
    #[arg(long)]
    end: Option<String>,
    /// IANA time zone of start and end [default: the advertiser's].
    #[arg(long)]
    time_zone: Option<String>,
    /// The line items are named "NAME hb_pb=BUCKET" [default: Prebid].
    #[arg(long)]
    name: Option<String>,
}

pub(crate) async fn run(command: PrebidCommand) -> Result<(), Failure> {
    let PrebidCommand::CreateSet(args) = command;
    let (_, store) = open_admin_store(&args.common).await?;
    let request = marquee_api::prebid::read_set(args.campaign, body(&args))?;
    let outcome = marquee_api::prebid::make_set(&*store, &request, None, &Actor::cli()).await?;
    println!("{}", serde_json::to_string_pretty(&outcome.json(&request))?);
    Ok(())
}

/// The arguments as the API's request body; what does not parse here goes on as text, for
/// the API's reader to name.
fn body(args: &CreateSetArgs) -> Map<String, Value> {
    let granularity = if args.granularity.trim_start().starts_with('{') {
        serde_json::from_str(&args.granularity).unwrap_or_else(|_| json!(args.granularity))
    } else {
        json!(args.granularity)
    };
    let sizes: Vec<Value> = args
        .sizes
        .iter()
        .map(|size| {
            size.split_once('x')
                .and_then(|(w, h)| {
                    Some(json!({ "w": w.parse::<u32>().ok()?, "h": h.parse::<u32>().ok()? }))
                })
                .unwrap_or_else(|| json!(size))
        })
        .collect();
    let mut body = Map::new();
    body.insert("granularity".into(), granularity);
    body.insert("placement_ids".into(), json!(args.placements));
    body.insert("sizes".into(), json!(sizes));
    body.insert("landing_url".into(), json!(args.landing_url));
    body.insert("start".into(), json!(args.start));
    for (key, value) in [
        ("end", &args.end),
        ("time_zone", &args.time_zone),
        ("name", &args.name),
    ] {
        if let Some(value) = value {
            body.insert(key.into(), json!(value));
        }
    }
    body
}
