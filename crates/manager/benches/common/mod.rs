//! Helpers shared by the benches (a folder, so that Cargo does not take it for a bench).

use marquee_model::Catalog;

/// Every (line item, creative, placement) the catalog can serve: each creative of a line item,
/// on each placement the line item is linked to.
pub fn slots(catalog: &Catalog) -> Vec<(u64, u64, u64)> {
    let mut slots = Vec::new();
    for (line_item, placement) in &catalog.links {
        for creative in catalog
            .creatives
            .iter()
            .filter(|c| c.object.line_item_id == *line_item)
        {
            slots.push((line_item.0, creative.meta.id, placement.0));
        }
    }
    slots
}
