/* Marquee async tag loader. Include once or many times: each run fills only the slots
   (<ins class="marquee" data-placement="ID">) not filled yet, all of them in one request, or
   one per distinct set of key-values: a slot's data-kv-KEY="VALUE" attributes go to the edge
   as kv=KEY:VALUE (how Prebid.js's hb_* targeting reaches the line items).
   Consent: data-gdpr="1|0" and data-gdpr-consent="TC string" on this script element when
   set; else the page's IAB TCF v2 CMP (__tcfapi), waited for up to a second (then: GDPR
   applies, no consent); with neither, no consent parameters. */
(function () {
  var script = document.currentScript;
  var base = script ? script.src.replace(/\/tag\.js(\?.*)?$/, '') : '';
  function param(applies, tc) {
    return '&gdpr=' + (applies ? 1 : 0) + (tc ? '&gdpr_consent=' + encodeURIComponent(tc) : '');
  }
  // Calls done once with the consent parameters.
  function consent(done) {
    var given = script && script.getAttribute('data-gdpr');
    if (given != null) return done(param(given !== '0', script.getAttribute('data-gdpr-consent')));
    var cmp = window.__tcfapi;
    if (typeof cmp !== 'function') return done('');
    var finished = false, listener = null;
    var timer = setTimeout(function () { finish(param(true)); }, 1000);
    function finish(text) {
      if (!finished) { finished = true; clearTimeout(timer); done(text); }
    }
    try {
      cmp('addEventListener', 2, function (tc, ok) {
        if (tc && tc.listenerId != null) listener = tc.listenerId;
        if (!ok || !tc) finish(param(true));
        else if (tc.gdprApplies === false) finish(param(false));
        else if (tc.eventStatus === 'tcloaded' || tc.eventStatus === 'useractioncomplete') {
          finish(param(true, tc.tcString));
        }
        if (finished && listener != null) {
          cmp('removeEventListener', 2, function () {}, listener);
          listener = null;
        }
      });
    } catch (e) {
      finish(param(true));
    }
  }
  function fill() {
    var slots = document.querySelectorAll('ins.marquee[data-placement]:not([data-marquee])');
    if (!slots.length) return;
    // Slots grouped by their key-values, in page order: one request per group.
    var groups = [], byKv = {};
    for (var i = 0; i < slots.length; i++) {
      slots[i].setAttribute('data-marquee', 'pending');
      var kv = keyValues(slots[i]);
      var group = byKv[kv];
      if (!group) {
        group = byKv[kv] = { kv: kv, slots: [], ids: [] };
        groups.push(group);
      }
      group.slots.push(slots[i]);
      group.ids.push(slots[i].getAttribute('data-placement'));
    }
    consent(function (signal) {
      groups.forEach(function (g) { request(g.slots, g.ids, g.kv, signal); });
    });
  }
  // The slot's data-kv-KEY attributes as kv=KEY:VALUE parameters, in attribute order.
  function keyValues(slot) {
    var text = '';
    for (var i = 0; i < slot.attributes.length; i++) {
      var name = slot.attributes[i].name;
      if (name.indexOf('data-kv-') === 0 && name.length > 8) {
        text += '&kv=' + encodeURIComponent(name.slice(8) + ':' + slot.attributes[i].value);
      }
    }
    return text;
  }
  function request(slots, ids, kv, signal) {
    var query = 'p=' + ids.join(',') + kv + '&url=' + encodeURIComponent(location.href) +
      signal + '&cb=' + Math.floor(Math.random() * 1e12);
    fetch(base + '/ad.json?' + query, { credentials: 'include' })
      .then(function (r) { return r.json(); })
      .then(function (answer) {
        (answer.ads || []).forEach(function (ad) {
          var slot = null;
          for (var s = 0; s < slots.length && !slot; s++) {
            if (slots[s].getAttribute('data-placement') === String(ad.placement) &&
              slots[s].getAttribute('data-marquee') === 'pending') slot = slots[s];
          }
          if (!slot) return;
          var frame = document.createElement('iframe');
          frame.setAttribute('sandbox',
            'allow-scripts allow-popups allow-popups-to-escape-sandbox');
          frame.setAttribute('scrolling', 'no');
          frame.style.border = '0';
          frame.width = ad.width;
          frame.height = ad.height;
          frame.srcdoc = ad.html;
          slot.appendChild(frame);
          slot.setAttribute('data-marquee', 'filled');
        });
        for (var j = 0; j < slots.length; j++) {
          if (slots[j].getAttribute('data-marquee') === 'pending') {
            slots[j].setAttribute('data-marquee', 'empty');
          }
        }
      })
      .catch(function () {
        for (var k = 0; k < slots.length; k++) slots[k].setAttribute('data-marquee', 'error');
      });
  }
  fill();
})();
