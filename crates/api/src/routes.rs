//! A router that documents itself: every route is added together with its OpenAPI operation,
//! so the served document and the routes cannot drift apart.

use std::collections::BTreeMap;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::http::{Method, header};
use axum::routing::{MethodFilter, get, on};
use serde_json::{Map, Value, json};

use crate::{ApiError, openapi};

#[derive(Debug, Default)]
pub struct RouteTable {
    router: Router,
    paths: BTreeMap<String, Map<String, Value>>,
    schemas: Map<String, Value>,
}

impl RouteTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `handler` for `method` on `path` (axum syntax, `{id}` for parameters, which is
    /// also OpenAPI's) and records `operation` under the same method and path.
    ///
    /// # Panics
    /// If `method` is not one axum can route (only standard methods are passed here).
    pub fn route<H, T, S>(
        mut self,
        method: Method,
        path: &str,
        handler: H,
        state: S,
        operation: Value,
    ) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
        S: Clone + Send + Sync + 'static,
    {
        let Ok(filter) = MethodFilter::try_from(method.clone()) else {
            unreachable!("only standard HTTP methods are routed")
        };
        self.router = self
            .router
            .route(path, on(filter, handler).with_state(state));
        self.paths
            .entry(path.to_owned())
            .or_default()
            .insert(method.as_str().to_ascii_lowercase(), operation);
        self
    }

    /// Component schemas referenced by operations as `#/components/schemas/NAME`.
    pub fn schemas_mut(&mut self) -> &mut Map<String, Value> {
        &mut self.schemas
    }

    /// Every documented (method, path) pair, methods upper-case.
    pub fn documented(&self) -> Vec<(String, String)> {
        self.paths
            .iter()
            .flat_map(|(path, ops)| {
                ops.keys()
                    .map(move |method| (method.to_ascii_uppercase(), path.clone()))
            })
            .collect()
    }

    /// The router, with the OpenAPI document describing exactly its routes served (and
    /// described) at [`crate::OPENAPI_PATH`], and JSON answers for unknown paths and methods.
    pub fn into_router(mut self, title: &str, version: &str) -> Router {
        self.paths
            .entry(crate::OPENAPI_PATH.to_owned())
            .or_default()
            .insert(
                "get".into(),
                openapi::public_operation(
                    "This document",
                    "meta",
                    openapi::responses([(200, json!({ "description": "OpenAPI 3 document" }))]),
                ),
            );
        let document: Arc<str> = json!({
            "openapi": "3.0.3",
            "info": {
                "title": title,
                "version": version,
                "description": "Marquee management API. Authenticate with `Authorization: Bearer <token>`; create tokens with `marquee token create`."
            },
            "paths": self.paths,
            "components": {
                "schemas": self.schemas,
                "securitySchemes": {
                    "bearer": { "type": "http", "scheme": "bearer" }
                }
            },
            "security": [{ "bearer": [] }]
        })
        .to_string()
        .into();
        self.router
            .route(
                crate::OPENAPI_PATH,
                get(move || {
                    let document = Arc::clone(&document);
                    async move {
                        (
                            [(header::CONTENT_TYPE, "application/json")],
                            document.to_string(),
                        )
                    }
                }),
            )
            .fallback(|| async { ApiError::NotFound("no such route".into()) })
            .method_not_allowed_fallback(|| async {
                ApiError::MethodNotAllowed("this route does not take that method".into())
            })
            .layer(DefaultBodyLimit::max(crate::MAX_BODY_BYTES))
    }
}
