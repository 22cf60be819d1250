//! What each role may write: the publisher's decisions on a line item, the approval of
//! creatives, and the audit of accounts.

use super::*;

/// An advertiser reads its line item, sends it back unchanged or with its own fields changed,
/// and is refused, naming the fields, when it raises the tier or the price; it books no new
/// line item and cancels none.
#[tokio::test]
async fn an_advertiser_cannot_change_what_the_publisher_sold() {
    let (app, w) = acme().await;
    let advertiser = app.token(Role::Advertiser, Some(w.advertiser)).await;
    let path = at("line-items", w.line_item);
    let read = app.get_as(&advertiser, &path).await.body;

    let reply = app
        .call("PUT", &path, Some(&advertiser), Some(read.clone()))
        .await;
    reply.assert_status(StatusCode::OK);
    let mut renamed = reply.body.clone();
    renamed["name"] = json!("Boots, renamed by the advertiser");
    let reply = app
        .call("PUT", &path, Some(&advertiser), Some(renamed))
        .await;
    reply.assert_status(StatusCode::OK);

    let mut raised = reply.body.clone();
    raised["tier"] = json!("sponsorship");
    raised["price"]["amount"] = json!("9.99");
    let reply = app
        .call("PUT", &path, Some(&advertiser), Some(raised.clone()))
        .await;
    reply.assert_fields(StatusCode::FORBIDDEN, ["tier", "price"]);
    assert_eq!(reply.body["error"]["code"], "forbidden");
    let message = reply.body["error"]["fields"][0]["message"]
        .as_str()
        .unwrap();
    assert!(message.contains("publisher's decision"), "{message}");
    let now = app.get(&path).await.body;
    assert_eq!(now["tier"], "standard");
    assert_eq!(now["price"]["amount"], "2.50");

    // The admin may.
    app.admin("PUT", &path, Some(raised))
        .await
        .assert_status(StatusCode::OK);

    let campaign = w.campaign;
    let reply = app
        .call(
            "POST",
            "/api/v1/line-items",
            Some(&advertiser),
            Some(line_item(campaign)),
        )
        .await;
    reply.assert_status(StatusCode::FORBIDDEN);
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("only an admin can create line-items"),
        "{message}"
    );
    app.call("DELETE", &path, Some(&advertiser), None)
        .await
        .assert_status(StatusCode::FORBIDDEN);
}

/// An advertiser's creative is pending until the admin approves it; its change of landing URL
/// sends it back to pending; a rejection needs a reason; only an admin reviews; each change of
/// state is in the creative's history.
#[tokio::test]
async fn creatives_are_reviewed_by_the_publisher() {
    let (app, w) = acme().await;
    let advertiser = app.token(Role::Advertiser, Some(w.advertiser)).await;
    // The admin's own creative is approved on creation.
    let admins = app.get(&at("creatives", w.creative)).await.body;
    assert_eq!(admins["approval"], json!({ "state": "approved" }));

    let proposal = json!({
        "line_item_id": w.line_item, "name": "Proposed", "size": { "w": 300, "h": 250 },
        "landing_url": "https://shop.example.com/new",
        "content": { "type": "image", "image_url": "https://cdn.example.com/new.png" },
        "approval": { "state": "approved" }
    });
    let reply = app
        .call(
            "POST",
            "/api/v1/creatives",
            Some(&advertiser),
            Some(proposal),
        )
        .await;
    reply.assert_status(StatusCode::CREATED);
    assert_eq!(
        reply.body["approval"],
        json!({ "state": "pending" }),
        "the body's claim is ignored"
    );
    let id = reply.body["id"].as_u64().unwrap();
    let approval = format!("/api/v1/creatives/{id}/approval");

    let reply = app
        .call(
            "POST",
            &approval,
            Some(&advertiser),
            Some(json!({ "state": "approved" })),
        )
        .await;
    reply.assert_status(StatusCode::FORBIDDEN);
    let reply = app
        .admin(
            "POST",
            &approval,
            Some(json!({ "state": "rejected", "reason": " " })),
        )
        .await;
    reply.assert_fields(StatusCode::UNPROCESSABLE_ENTITY, ["approval.reason"]);
    let reply = app
        .admin("POST", &approval, Some(json!({ "state": "maybe" })))
        .await;
    reply.assert_fields(StatusCode::BAD_REQUEST, ["state"]);

    let reply = app
        .admin("POST", &approval, Some(json!({ "state": "approved" })))
        .await;
    reply.assert_status(StatusCode::OK);
    assert_eq!(reply.body["approval"]["state"], "approved");

    // Renaming keeps the approval; a new landing URL needs another review.
    let mut edited = reply.body.clone();
    edited["name"] = json!("Proposed, renamed");
    let reply = app
        .call("PUT", &at("creatives", id), Some(&advertiser), Some(edited))
        .await;
    reply.assert_status(StatusCode::OK);
    assert_eq!(reply.body["approval"]["state"], "approved");
    let mut moved = reply.body.clone();
    moved["landing_url"] = json!("https://elsewhere.example.com/");
    let reply = app
        .call("PUT", &at("creatives", id), Some(&advertiser), Some(moved))
        .await;
    assert_eq!(reply.body["approval"]["state"], "pending");
    let reply = app
        .admin(
            "POST",
            &approval,
            Some(json!({ "state": "rejected", "reason": "The landing page is not the advertiser's" })),
        )
        .await;
    assert_eq!(
        reply.body["approval"],
        json!({ "state": "rejected", "reason": "The landing page is not the advertiser's" })
    );

    // The advertiser reads the history of its creative's review.
    let history = app
        .get_as(
            &advertiser,
            &format!("/api/v1/audit?object_kind=creative&object_id={id}"),
        )
        .await
        .body;
    let states: Vec<Value> = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| {
            e["changes"]
                .get("approval")
                .map(|c| c["after"]["state"].clone())
        })
        .collect();
    assert_eq!(
        states,
        [
            json!("rejected"),
            json!("pending"),
            json!("approved"),
            json!("pending")
        ]
    );
}

/// Tokens made and revoked are in the audit log for admins, with their role and label and
/// never their secret; a tenant cannot ask for accounts' history.
#[tokio::test]
async fn token_changes_are_audited_for_admins() {
    let (app, w) = acme().await;
    let advertiser = app.token(Role::Advertiser, Some(w.advertiser)).await;
    let revoked = app
        .store
        .list_tokens()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.role == Role::Advertiser)
        .unwrap();
    app.store
        .revoke_token(revoked.id, &Actor::cli())
        .await
        .unwrap();

    let reply = app.get("/api/v1/audit?object_kind=api_token").await;
    reply.assert_status(StatusCode::OK);
    let entries: Vec<(String, String, u64)> = reply.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_owned(),
                e["changes"]["role"]
                    .as_object()
                    .map(|c| c.values().find_map(Value::as_str).unwrap().to_owned())
                    .unwrap(),
                e["object_id"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        entries[..2],
        [
            ("revoke".to_owned(), "advertiser".to_owned(), revoked.id),
            ("create".to_owned(), "advertiser".to_owned(), revoked.id),
        ]
    );
    assert!(
        !reply.body.to_string().contains(&advertiser),
        "no secret in the log"
    );

    let tenant = app.token(Role::Advertiser, Some(w.advertiser)).await;
    for kind in ["api_token", "user"] {
        app.get_as(&tenant, &format!("/api/v1/audit?object_kind={kind}"))
            .await
            .assert_status(StatusCode::FORBIDDEN);
    }
    let everything = app.get_as(&tenant, "/api/v1/audit").await.body;
    assert!(
        everything["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["object_kind"] != "api_token"),
        "a tenant's history holds no accounts"
    );
}
