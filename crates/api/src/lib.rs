//! The management API: JSON over HTTP under `/api/v1/`, for every managed object, the links
//! between line items and placements, the creative library, copies and bulk status changes
//! (`library.rs`), and delivery reports (`/api/v1/reports`, JSON or CSV).
//!
//! Invariants:
//! - Every route is added through [`RouteTable`] together with its OpenAPI operation, so the
//!   document at `/api/v1/openapi.json` lists exactly the routes served.
//! - Every failure is an [`ApiError`], turned into a status and JSON body in one place
//!   (`error.rs`).
//! - Handlers never check tenancy by hand beyond the caller's role: they pass the caller's scope
//!   to the store, which enforces it. Which writes a role may make is [`check_write`], asked by
//!   every create, update and archive (the dashboard's forms too); which fields it may set, and
//!   a creative's approval, is [`govern_write`], applied to every create and update.
//! - Every money amount under an advertiser is in the advertiser's currency: creates and updates
//!   pass [`check_currency`] (the dashboard's forms too) before the store writes.

pub mod amounts;
mod approval;
mod audit;
mod auth;
mod currency;
mod error;
mod extract;
pub mod forecasts;
mod geo;
mod library;
mod links;
mod objects;
pub mod openapi;
pub mod prebid;
mod read;
mod reports;
mod roles;
mod routes;
mod tags;

use std::sync::Arc;

use axum::http::Method;
use marquee_model::{
    Advertiser, Campaign, Clock, Creative, LineItem, Object, Placement, Publisher, Site,
};
use marquee_store::Store;
use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;

pub use approval::read_approval;
pub use audit::present_changes;
pub use auth::{Caller, HasStore, generate_token, hash_token};
pub use currency::{CurrencyRuleError, ObjectWrite, check_currency, currency_under};
pub use error::ApiError;
pub use forecasts::{Forecasts, ForecastsState};
pub use geo::{GeoAvailability, GeoLocationSource};
pub use library::{BulkAction, BulkOutcome, MAX_BULK_IDS, apply_bulk, copy_line_item};
pub use objects::{check_name_filter, resource};
pub use read::{example, plain_message, read_object};
pub use reports::{
    BuiltReport, FilterNames, PARAMETERS as REPORT_PARAMETERS, ProgrammaticReports, ReportsState,
    build_report, filter_names, report_csv,
};
pub use roles::{
    Change, FieldsRefused, RuleError, WriteRefused, admin_fields, check_write, govern_write,
};
pub use routes::RouteTable;
pub use tags::tags;

/// Shared state of the API handlers.
#[derive(Debug, Clone)]
pub struct ApiState {
    pub store: Arc<dyn Store>,
    /// Public base URL of the edges, for generated ad tags.
    pub ad_url: Arc<str>,
    /// Where the edges learn a request's location: line items whose geo targeting cannot
    /// match ad requests are answered with a warning.
    pub geo: GeoAvailability,
}

impl HasStore for ApiState {
    fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
}

/// Path of the served OpenAPI document.
pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";

/// Largest request body the API reads (2 MiB, axum's default, stated so that the error can
/// name it); a larger one is refused with 413 `payload_too_large`.
pub const MAX_BODY_BYTES: usize = 2 << 20;

/// Settings of the API beyond the store.
#[derive(Debug, Clone)]
pub struct ApiOptions {
    /// The most rows one report may answer (`reports.max_rows`).
    pub report_max_rows: usize,
    /// The gateway's bidders and currency, for reports of programmatic demand.
    pub programmatic: ProgrammaticReports,
    /// The forecasting service; without one the forecast routes are not served.
    pub forecasts: Option<Arc<dyn Forecasts>>,
}

impl Default for ApiOptions {
    fn default() -> Self {
        ApiOptions {
            report_max_rows: 100_000,
            programmatic: ProgrammaticReports::default(),
            forecasts: None,
        }
    }
}

/// Adds every `/api/v1` route to `table` with default [`ApiOptions`] and no geo source
/// ([`GeoAvailability::None`]). `ad_url` is the edges' public base URL, used in the generated
/// ad tags; `clock` says when "now" is (a report without `to` ends then).
pub fn add_routes(
    table: RouteTable,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    ad_url: &str,
) -> RouteTable {
    add_routes_with(
        table,
        store,
        clock,
        ad_url,
        ApiOptions::default(),
        GeoAvailability::default(),
    )
}

/// Adds every `/api/v1` route to `table`; `geo` says where the edges learn a request's
/// location, for the warnings of line items.
pub fn add_routes_with(
    mut table: RouteTable,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    ad_url: &str,
    options: ApiOptions,
    geo: GeoAvailability,
) -> RouteTable {
    let reports = ReportsState::new(Arc::clone(&store), clock, options.report_max_rows)
        .with_programmatic(options.programmatic);
    let state = ApiState {
        store,
        ad_url: ad_url.into(),
        geo,
    };
    let mut generator = SchemaGenerator::new(SchemaSettings::openapi3());
    let mut names = Vec::new();
    table = add_object_routes::<Advertiser>(table, &state, &mut generator, &mut names);
    table = add_object_routes::<Campaign>(table, &state, &mut generator, &mut names);
    table = add_object_routes::<LineItem>(table, &state, &mut generator, &mut names);
    table = add_object_routes::<Creative>(table, &state, &mut generator, &mut names);
    table = add_object_routes::<Publisher>(table, &state, &mut generator, &mut names);
    table = add_object_routes::<Site>(table, &state, &mut generator, &mut names);
    table = add_object_routes::<Placement>(table, &state, &mut generator, &mut names);
    openapi::add_schemas(table.schemas_mut(), generator, &names);

    let links = "/api/v1/line-items/{id}/placements";
    let link = "/api/v1/line-items/{id}/placements/{placement_id}";
    if let Some(service) = options.forecasts {
        let forecasts = ForecastsState {
            api: state.clone(),
            service,
        };
        table = table
            .route(
                Method::POST,
                "/api/v1/forecasts",
                forecasts::propose,
                forecasts.clone(),
                openapi::forecast_operation(),
            )
            .route(
                Method::GET,
                "/api/v1/line-items/{id}/forecast",
                forecasts::delivery,
                forecasts,
                openapi::delivery_forecast_operation(),
            );
    }
    table
        .route(
            Method::GET,
            links,
            links::list,
            state.clone(),
            openapi::link_list_operation(),
        )
        .route(
            Method::PUT,
            link,
            links::link,
            state.clone(),
            openapi::link_operation(true),
        )
        .route(
            Method::DELETE,
            link,
            links::unlink,
            state.clone(),
            openapi::link_operation(false),
        )
        .route(
            Method::POST,
            "/api/v1/creatives/{id}/approval",
            approval::set,
            state.clone(),
            approval::operation_doc(),
        )
        .route(
            Method::GET,
            "/api/v1/line-items/{id}/creatives",
            library::list,
            state.clone(),
            library::list_doc(),
        )
        .route(
            Method::PUT,
            "/api/v1/line-items/{id}/creatives/{creative_id}",
            library::assign,
            state.clone(),
            library::assign_doc(true),
        )
        .route(
            Method::DELETE,
            "/api/v1/line-items/{id}/creatives/{creative_id}",
            library::unassign,
            state.clone(),
            library::assign_doc(false),
        )
        .route(
            Method::GET,
            "/api/v1/creatives/{id}/line-items",
            library::uses,
            state.clone(),
            library::uses_doc(),
        )
        .route(
            Method::POST,
            "/api/v1/line-items/{id}/copy",
            library::copy,
            state.clone(),
            library::copy_doc(),
        )
        .route(
            Method::GET,
            "/api/v1/audit",
            audit::list,
            state.clone(),
            audit::operation_doc(),
        )
        .route(
            Method::POST,
            "/api/v1/campaigns/{id}/prebid-line-items",
            prebid::create,
            state.clone(),
            prebid::operation_doc(),
        )
        .route(
            Method::GET,
            "/api/v1/placements/{id}/tags",
            tags::get,
            state,
            openapi::tags_operation(),
        )
        .route(
            Method::GET,
            "/api/v1/reports",
            reports::get,
            reports,
            reports::operation_doc(),
        )
}

fn add_object_routes<T: Object>(
    table: RouteTable,
    state: &ApiState,
    generator: &mut SchemaGenerator,
    names: &mut Vec<String>,
) -> RouteTable {
    generator.subschema_for::<T>();
    names.push(T::schema_name().into_owned());
    let collection = format!("/api/v1/{}", T::KIND.collection());
    let item = format!("{collection}/{{id}}");
    let ops = openapi::object_operations::<T>();
    table
        .route(
            Method::POST,
            &format!("{collection}/bulk"),
            library::bulk::<T>,
            state.clone(),
            library::bulk_doc(T::KIND),
        )
        .route(
            Method::GET,
            &collection,
            objects::list::<T>,
            state.clone(),
            ops.list,
        )
        .route(
            Method::POST,
            &collection,
            objects::create::<T>,
            state.clone(),
            ops.create,
        )
        .route(
            Method::GET,
            &item,
            objects::get::<T>,
            state.clone(),
            ops.get,
        )
        .route(
            Method::PUT,
            &item,
            objects::update::<T>,
            state.clone(),
            ops.update,
        )
        .route(
            Method::DELETE,
            &item,
            objects::archive::<T>,
            state.clone(),
            ops.archive,
        )
}
