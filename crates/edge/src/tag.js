/* Marquee async tag loader. Include once or many times: each run fills only the slots
   (<ins class="marquee" data-placement="ID">) not filled yet, all of them in one request. */
(function () {
  var script = document.currentScript;
  var base = script ? script.src.replace(/\/tag\.js(\?.*)?$/, '') : '';
  function fill() {
    var slots = document.querySelectorAll('ins.marquee[data-placement]:not([data-marquee])');
    if (!slots.length) return;
    var ids = [];
    for (var i = 0; i < slots.length; i++) {
      slots[i].setAttribute('data-marquee', 'pending');
      ids.push(slots[i].getAttribute('data-placement'));
    }
    var query = 'p=' + ids.join(',') + '&url=' + encodeURIComponent(location.href) +
      '&cb=' + Math.floor(Math.random() * 1e12);
    fetch(base + '/ad.json?' + query, { credentials: 'include' })
      .then(function (r) { return r.json(); })
      .then(function (answer) {
        (answer.ads || []).forEach(function (ad) {
          var slot = document.querySelector(
            'ins.marquee[data-placement="' + ad.placement + '"][data-marquee="pending"]');
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
