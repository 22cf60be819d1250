use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

macro_rules! ids {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
            JsonSchema,
        )]
        #[serde(transparent)]
        #[schemars(transparent)]
        pub struct $name(pub u64);

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    )*};
}

ids!(
    /// Id of an [`crate::Advertiser`].
    AdvertiserId,
    /// Id of a [`crate::Campaign`].
    CampaignId,
    /// Id of a [`crate::LineItem`].
    LineItemId,
    /// Id of a [`crate::Creative`].
    CreativeId,
    /// Id of a [`crate::Publisher`].
    PublisherId,
    /// Id of a [`crate::Site`].
    SiteId,
    /// Id of a [`crate::Placement`].
    PlacementId,
);
