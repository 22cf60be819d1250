//! The rule across objects that every money amount under an advertiser is in the advertiser's
//! currency ([`Object::currency`] says which objects hold amounts): its line items' prices, and
//! with them their spend goals and the spend their events carry. Reports sum an advertiser's
//! spend and label the total with the advertiser's currency, so amounts in another currency
//! would be mislabelled, and amounts in two would make a meaningless sum.
//!
//! The API's handlers and the dashboard's forms check it before every create, and every update
//! that changes an amount's currency (an object stored before the rule keeps its currency and
//! stays writable, so that it can at least be paused). It is
//! a read before the store's write, not part of the write's transaction: a line item created at
//! the very moment its advertiser's currency changes can slip between the two.

use std::collections::BTreeMap;

use marquee_model::{Advertiser, Currency, LineItem, Object, ObjectKind, Status, ValidationError};
use marquee_store::{ListQuery, MAX_PAGE, Record, Store, StoreError};

/// What a write does with the object it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectWrite {
    Create,
    /// Replaces the object with this id.
    Update(u64),
}

/// Why an object may not be written as it is, or why that could not be told.
#[derive(Debug, thiserror::Error)]
pub enum CurrencyRuleError {
    /// An amount in another currency than its advertiser's; the violation names the field and
    /// both currencies.
    #[error(transparent)]
    Broken(#[from] ValidationError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Most line item ids a refused currency change names.
const NAMED_LINE_ITEMS: usize = 5;

/// Checks that writing `object` (by a caller confined to `scope`) keeps every amount under its
/// advertiser in the advertiser's currency: a line item's price must be in its advertiser's
/// currency, and an advertiser's currency may change only when every line item it has, archived
/// ones included (their spend stays in its reports), is priced in the new one.
///
/// A write the store will refuse anyway (a missing, archived or other tenant's parent or object,
/// a move to another parent) passes, so that the store's own error is the answer.
pub async fn check_currency<T: Object>(
    store: &dyn Store,
    object: &T,
    write: ObjectWrite,
    scope: Option<u64>,
) -> Result<(), CurrencyRuleError> {
    let Some((path, currency)) = object.currency() else {
        return Ok(());
    };
    if T::KIND == ObjectKind::Advertiser {
        return match write {
            // Nothing is under a new advertiser yet.
            ObjectWrite::Create => Ok(()),
            ObjectWrite::Update(id) => {
                check_advertiser_change(store, id, path, currency, scope).await
            }
        };
    }
    let advertiser = match write {
        ObjectWrite::Create => match (T::KIND.parent(), object.parent_id()) {
            (Some(parent), Some(parent_id)) => {
                advertiser_under(store, parent, parent_id, scope).await?
            }
            _ => None,
        },
        ObjectWrite::Update(id) => {
            let Some(current) = writable(store.get(T::KIND, id, scope).await)?
                .filter(|current| current.parent_id == object.parent_id())
            else {
                return Ok(());
            };
            // An amount keeping the currency it is stored in stays writable: a line item
            // written before the rule must still be pausable; only a change must obey it.
            if current.decode::<T>()?.object.currency().map(|(_, c)| c) == Some(currency) {
                return Ok(());
            }
            Some(current.owner_id)
        }
    };
    let Some(advertiser) = advertiser else {
        return Ok(());
    };
    let expected = advertiser_currency(store, advertiser, scope).await?;
    if currency == expected {
        return Ok(());
    }
    Err(ValidationError::single(
        path,
        format!(
            "must be {expected}, the currency of advertiser {advertiser}, not {currency}: an \
             advertiser's prices, budgets and reports are all in its currency"
        ),
    )
    .into())
}

/// The currency of every amount under `parent` (an advertiser, or a campaign for a new line
/// item): its advertiser's. `None` if the parent is missing, outside `scope` or archived.
pub async fn currency_under(
    store: &dyn Store,
    parent: ObjectKind,
    parent_id: u64,
    scope: Option<u64>,
) -> Result<Option<Currency>, StoreError> {
    match advertiser_under(store, parent, parent_id, scope).await? {
        Some(advertiser) => Ok(Some(advertiser_currency(store, advertiser, scope).await?)),
        None => Ok(None),
    }
}

/// The advertiser of `parent` (itself, for an advertiser); `None` as for [`currency_under`].
async fn advertiser_under(
    store: &dyn Store,
    parent: ObjectKind,
    parent_id: u64,
    scope: Option<u64>,
) -> Result<Option<u64>, StoreError> {
    Ok(writable(store.get(parent, parent_id, scope).await)?.map(|parent| parent.owner_id))
}

/// A record a write may go under or replace; `None` if it is missing (or outside the scope) or
/// archived, which the store's write answers with its own error.
fn writable(found: Result<Record, StoreError>) -> Result<Option<Record>, StoreError> {
    match found {
        Ok(record) if record.status == Status::Archived => Ok(None),
        Ok(record) => Ok(Some(record)),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(error) => Err(error),
    }
}

async fn advertiser_currency(
    store: &dyn Store,
    advertiser: u64,
    scope: Option<u64>,
) -> Result<Currency, StoreError> {
    Ok(store
        .get_object::<Advertiser>(advertiser, scope)
        .await?
        .object
        .currency)
}

async fn check_advertiser_change(
    store: &dyn Store,
    id: u64,
    path: &'static str,
    currency: Currency,
    scope: Option<u64>,
) -> Result<(), CurrencyRuleError> {
    let Some(current) = writable(store.get(ObjectKind::Advertiser, id, scope).await)? else {
        return Ok(());
    };
    let old = current.decode::<Advertiser>()?.object.currency;
    if old == currency {
        return Ok(());
    }
    let others = line_items_priced_otherwise(store, id, currency).await?;
    if others.is_empty() {
        return Ok(());
    }
    Err(ValidationError::single(
        path,
        format!(
            "cannot change from {old} to {currency} while line items are priced in another \
             currency ({}); archived ones count, as their spend stays in the reports: create \
             another advertiser for {currency}",
            describe(&others)
        ),
    )
    .into())
}

/// The ids of the advertiser's line items, archived ones too, priced in another currency than
/// `currency`, by their currency.
async fn line_items_priced_otherwise(
    store: &dyn Store,
    advertiser: u64,
    currency: Currency,
) -> Result<BTreeMap<Currency, Vec<u64>>, StoreError> {
    let mut others: BTreeMap<Currency, Vec<u64>> = BTreeMap::new();
    let mut query = ListQuery {
        scope: Some(advertiser),
        limit: MAX_PAGE,
        ..ListQuery::default()
    };
    loop {
        let page = store.list(ObjectKind::LineItem, &query).await?;
        for record in &page {
            let priced_in = record.decode::<LineItem>()?.object.price.currency;
            if priced_in != currency {
                others.entry(priced_in).or_default().push(record.meta.id);
            }
        }
        match page.last() {
            Some(last) if page.len() == MAX_PAGE as usize => query.after = Some(last.meta.id),
            _ => return Ok(others),
        }
    }
}

/// `EUR: line items 4, 7; GBP: line item 9`, naming at most [`NAMED_LINE_ITEMS`] ids.
fn describe(by_currency: &BTreeMap<Currency, Vec<u64>>) -> String {
    let total: usize = by_currency.values().map(Vec::len).sum();
    let mut named = 0;
    let mut parts = Vec::new();
    for (currency, ids) in by_currency {
        let take = ids.len().min(NAMED_LINE_ITEMS - named);
        if take == 0 {
            break;
        }
        named += take;
        let list: Vec<String> = ids[..take].iter().map(u64::to_string).collect();
        let noun = if take == 1 { "line item" } else { "line items" };
        parts.push(format!("{currency}: {noun} {}", list.join(", ")));
    }
    let more = total - named;
    if more > 0 {
        parts.push(format!("and {more} more"));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_change_names_a_few_line_items_by_currency_and_counts_the_rest() {
        let eur = Currency::EUR;
        let gbp = Currency::try_from("GBP").unwrap();
        let one = BTreeMap::from([(eur, vec![4])]);
        assert_eq!(describe(&one), "EUR: line item 4");
        let many = BTreeMap::from([(eur, vec![1, 2, 3, 4]), (gbp, vec![5, 6, 7])]);
        assert_eq!(
            describe(&many),
            "EUR: line items 1, 2, 3, 4; GBP: line item 5; and 2 more"
        );
    }
}
