//! Roles on the desk: the publisher's fields of a line item fixed for an advertiser's user,
//! creatives it proposes reviewed by the admin, and the admin's Audit page.

use super::*;

/// The admin's site with a campaign and a line item of Acme's, and the session of Acme's user "acme-ops".
async fn acme_line_item_and_its_user() -> (Site, String, String, u64, String) {
    let (site, admin) = Site::as_root().await;
    let campaign = acme_campaign(&site, &admin).await;
    let line_item = site
        .create(&admin, "line-items", &line_item_form(&campaign))
        .await;
    let acme = site
        .store
        .get(ObjectKind::LineItem, line_item, None)
        .await
        .unwrap()
        .owner_id;
    site.user("acme-ops", Role::Advertiser, Some(acme)).await;
    let alice = site.sign_in("acme-ops", PASSWORD).await.unwrap();
    (site, admin, campaign, line_item, alice)
}

/// An advertiser's user sees tier, weight, price, goal and pacing as text, saves its line
/// item with them unchanged, and is refused when the post changes them anyway.
#[tokio::test]
async fn an_advertiser_user_sees_the_publishers_fields_fixed() {
    let (site, admin, campaign, line_item, alice) = acme_line_item_and_its_user().await;
    let path = format!("/line-items/{line_item}");

    let page = site.get_ok(&path, &alice).await;
    for field in ["tier", "weight", "price.amount", "goal.metric", "pacing"] {
        let block = field_block(&page.body, field);
        assert!(block.contains("class=\"fixed\""), "{field}: {block}");
        assert!(
            !block.contains("<select") && !block.contains("type=\"text\""),
            "{block}"
        );
    }
    assert!(field_block(&page.body, "price.amount").contains("$2.5"));
    assert!(!field_block(&page.body, "name").contains("class=\"fixed\""));
    // The admin's own page keeps them editable.
    let page = site.get_ok(&path, &admin).await;
    assert!(field_block(&page.body, "tier").contains("<select"));

    let csrf = site.csrf(&alice).await;
    let mut same = vec![("csrf", csrf.as_str()), ("version", "1")];
    same.extend(line_item_form(&campaign));
    for field in &mut same {
        if field.0 == "name" {
            field.1 = "Winter sale, renamed";
        }
    }
    let saved = site.post(&path, &alice, &same).await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);

    let mut raised = same.clone();
    raised[1] = ("version", "2");
    for field in &mut raised {
        if field.0 == "tier" {
            field.1 = "sponsorship";
        }
    }
    let refused = site.post(&path, &alice, &raised).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        field_block(&refused.body, "tier").contains("is the publisher&#39;s decision"),
        "{}",
        field_block(&refused.body, "tier")
    );
    let stored = site
        .store
        .get(ObjectKind::LineItem, line_item, None)
        .await
        .unwrap();
    assert!(stored.body.contains("\"tier\":\"standard\""));
}

/// An advertiser's creative waits for the admin's review, which the creatives list's queue
/// finds and the creative page records; the Audit page lists the changes by who made them.
#[tokio::test]
async fn a_creative_from_an_advertiser_is_approved_by_the_admin_and_audited() {
    let (site, admin, _, line_item, alice) = acme_line_item_and_its_user().await;

    let made = upload_creative(
        &site,
        &alice,
        &line_item.to_string(),
        "https://shop.example/",
    )
    .await;
    made.assert_status(StatusCode::SEE_OTHER);
    let creative = id_in(&made.location);
    let path = format!("/creatives/{creative}");
    let page = site.get_ok(&path, &alice).await;
    assert!(page.body.contains("Pending approval"));
    assert!(
        !page.body.contains(">Approve</button>"),
        "no review for the advertiser"
    );
    let queue = site.get_ok("/creatives?approval=pending", &admin).await;
    assert!(queue.body.contains(&format!("{path}\"")));
    assert!(
        !site
            .get_ok("/creatives?approval=approved", &admin)
            .await
            .body
            .contains(&format!("{path}\""))
    );

    let csrf = site.csrf(&alice).await;
    let approve = format!("{path}/approval");
    let refused = site
        .post(&approve, &alice, &[("csrf", &csrf), ("state", "approved")])
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let admin_csrf = site.csrf(&admin).await;
    let page = site.get_ok(&path, &admin).await;
    assert!(page.body.contains(">Approve</button>"));
    let approved = site
        .post(
            &approve,
            &admin,
            &[("csrf", &admin_csrf), ("state", "approved")],
        )
        .await;
    assert_eq!(approved.status, StatusCode::SEE_OTHER, "{}", approved.body);
    assert!(site.get_ok(&path, &alice).await.body.contains(">Approved<"));

    // The Audit page: the admin's, filtered by who and kind.
    assert_eq!(
        site.get("/audit", &alice).await.status,
        StatusCode::FORBIDDEN
    );
    let audit = site.get_ok("/audit", &admin).await;
    assert!(audit.body.contains("href=\"/audit\""), "in the navigation");
    assert!(audit.body.contains("user:acme-ops"));
    let theirs = site
        .get_ok("/audit?who=user%3Aacme-ops&kind=creative", &admin)
        .await;
    assert!(theirs.body.contains("Uploaded banner"));
    assert!(!theirs.body.contains("Winter sale (#"), "{}", theirs.body);
    let review = site
        .get_ok(
            &format!("/audit?kind=creative&object={creative}&who=user%3Aroot"),
            &admin,
        )
        .await;
    assert!(
        review.body.contains("<code>approval</code>"),
        "{}",
        review.body
    );
    let accounts = site.get_ok("/audit?kind=user", &admin).await;
    assert!(accounts.body.contains("acme-ops"));
    let later = site.get_ok("/audit?from=2999-01-01", &admin).await;
    assert!(later.body.contains("No changes match these filters"));
}
