// The dashboard: a page of this origin talking to /v1 with the session cookie, and
// X-CSRF-Token on every write. Everything shown is built with DOM calls and textContent,
// so markup in an account label, a webhook URL or an order field shows as text. Secrets
// shown once (API key, webhook signing secret) live only in the DOM until dismissed: never
// in storage, the URL or the history.
"use strict";
(function () {
  var lang = (navigator.language || "en").slice(0, 2);
  var TX = window.TEXTS[lang] || window.TEXTS.en;
  function T(key, vars) {
    var s = TX[key] !== undefined ? TX[key] : window.TEXTS.en[key];
    if (s === undefined) { return key; }
    return s.replace(/\{(\w+)\}/g, function (_, k) { return vars && vars[k] !== undefined && vars[k] !== null ? String(vars[k]) : ""; });
  }
  function meta(name) { var m = document.querySelector('meta[name="' + name + '"]'); return m ? m.content : ""; }
  var CFG = { brand: meta("rental-brand"), network: meta("rental-network"), explorer: meta("rental-explorer-tx") };

  // ---- DOM helpers -------------------------------------------------------------------
  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === undefined || v === null || v === false) { return; }
        if (k.slice(0, 2) === "on") { el.addEventListener(k.slice(2), v); }
        else if (k === "text") { el.textContent = v; }
        else if (k === "class") { el.className = v; }
        else if (k === "value") { el.value = v; }
        else if (k === "checked") { el.checked = !!v; }
        else { el.setAttribute(k, v === true ? "" : v); }
      });
    }
    for (var i = 2; i < arguments.length; i++) { add(el, arguments[i]); }
    return el;
  }
  // add appends every argument after el: nodes, strings (as text), arrays of them.
  function add(el) {
    for (var i = 1; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === undefined || c === null || c === false) { continue; }
      if (Array.isArray(c)) { c.forEach(function (x) { add(el, x); }); continue; }
      el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    }
    return el;
  }
  function clear(el) { while (el.firstChild) { el.removeChild(el.firstChild); } return el; }
  var main = document.getElementById("main");
  function toast(msg) {
    var t = document.getElementById("toast");
    t.textContent = msg;
    t.classList.add("show");
    clearTimeout(toast.timer);
    toast.timer = setTimeout(function () { t.classList.remove("show"); }, 4000);
  }

  // ---- formatting --------------------------------------------------------------------
  // sunToTRX formats an integer SUN amount exactly: no floating point.
  function sunToTRX(sun) {
    var s = String(sun), neg = s[0] === "-";
    if (neg) { s = s.slice(1); }
    while (s.length < 7) { s = "0" + s; }
    var whole = s.slice(0, -6), frac = s.slice(-6).replace(/0+$/, "");
    whole = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return (neg ? "-" : "") + whole + (frac ? "." + frac : "") + " TRX";
  }
  // USDT amounts come in units of 1e-6 USDT, the same six decimals as SUN to TRX.
  function microUSDT(n) { return n === null || n === undefined ? "–" : sunToTRX(n).replace(/ TRX$/, " USDT"); }
  function group(n) { return n === null || n === undefined ? "–" : String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  function sunText(sun) { return sunToTRX(sun) + " (" + group(sun) + " SUN)"; }
  function when(ts) {
    if (!ts) { return "–"; }
    var d = new Date(ts);
    return isNaN(d) ? ts : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  }
  function explorerLink(tx) {
    if (!CFG.explorer) { return h("code", { text: tx }); }
    return h("a", { href: CFG.explorer.replace("{tx}", encodeURIComponent(tx)), rel: "noopener noreferrer", target: "_blank", class: "mono", text: tx });
  }

  // ---- API ---------------------------------------------------------------------------
  var session = null; // {csrf_token, address, role, ...} of the signed-in session
  function ApiError(status, body) {
    var e = (body && body.error) || {};
    this.status = status; this.code = e.code || 0; this.slug = e.slug || ""; this.message = e.message || ("HTTP " + status);
    this.details = e.details || {}; this.field = e.field;
  }
  function NetError(msg) { this.network = true; this.message = msg; }
  // api calls the API. A request refused by the rate limit (1100) was not processed, so it
  // is sent again after Retry-After (at most twice, at most 3 s each), whatever its method.
  function api(method, path, body, tries) {
    tries = tries || 0;
    var headers = { "Accept": "application/json" };
    if (body !== undefined) { headers["Content-Type"] = "application/json"; }
    if (method !== "GET" && session) { headers["X-CSRF-Token"] = session.csrf_token; }
    return fetch(path, { method: method, headers: headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body) })
      .catch(function (e) { throw new NetError(String(e && e.message || e)); })
      .then(function (r) {
        if (r.status === 204) { return null; }
        return r.text().then(function (txt) {
          var data = null;
          try { data = txt ? JSON.parse(txt) : null; } catch (e) { data = null; }
          if (!r.ok) {
            var err = new ApiError(r.status, data);
            if (err.code === 1100 && tries < 2) {
              var wait = Math.min(3, Math.max(1, parseInt(r.headers.get("Retry-After"), 10) || 1));
              return new Promise(function (res) { setTimeout(res, wait * 1000); }).then(function () { return api(method, path, body, tries + 1); });
            }
            if (err.code === 1013 && session) { sessionEnded(); }
            throw err;
          }
          return data;
        });
      });
  }
  // errorText is the message for an error, with what to do next where the code has one.
  function errorText(e) {
    if (e instanceof NetError) { return T("err.network", { msg: e.message }); }
    if (e.code === 4001) {
      var req = e.details.required_sun, avail = e.details.available_sun;
      if (req !== undefined && avail !== undefined) {
        return T("err.4001", { req: sunText(req), avail: sunText(avail), missing: sunText(Math.max(0, req - avail)) });
      }
    }
    if (TX["err." + e.code]) { return T("err." + e.code); }
    return T("err.generic", { code: e.code || e.status, slug: e.slug, msg: e.message });
  }
  function errorBox(e) { return h("p", { class: "error", role: "alert", text: errorText(e) }); }

  // ---- drafts: what the user typed survives a re-render and a session that ends --------
  var drafts = {};
  function input(id, attrs) {
    attrs = attrs || {};
    attrs.id = id; attrs.name = id;
    if (drafts[id] !== undefined) {
      if (attrs.type === "checkbox") { attrs.checked = drafts[id]; } else { attrs.value = drafts[id]; }
    }
    var el = h(attrs.tag || "input", Object.assign({}, attrs, { tag: undefined }));
    el.addEventListener("input", function () { drafts[id] = el.type === "checkbox" ? el.checked : el.value; });
    el.addEventListener("change", function () { drafts[id] = el.type === "checkbox" ? el.checked : el.value; });
    return el;
  }
  function field(label, el, hint) {
    return h("div", { class: "field" }, h("label", { for: el.id, text: label }), el, hint ? h("small", { class: "muted", text: hint }) : null);
  }
  function select(id, options, value) {
    var cur = drafts[id] !== undefined ? drafts[id] : value;
    var el = h("select", { id: id, name: id });
    options.forEach(function (o) { el.appendChild(h("option", { value: o[0], text: o[1], selected: o[0] === cur ? true : undefined })); });
    el.addEventListener("change", function () { drafts[id] = el.value; });
    return el;
  }
  function button(text, onclick, cls, id) { return h("button", { type: "button", class: cls || "", id: id, onclick: onclick, text: text }); }
  function copyButton(value) {
    return button(T("copy"), function () {
      var done = function () { toast(T("copied")); };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(value).then(done, function () { toast(T("copy.failed")); });
      } else { toast(T("copy.failed")); }
    }, "small");
  }
  // qrSVG draws text as a QR code with SVG elements (qrcode-generator, vendored).
  function qrSVG(text) {
    var q = window.qrcode(0, "M");
    q.addData(text);
    q.make();
    var n = q.getModuleCount(), m = 4, ns = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 " + (n + 2 * m) + " " + (n + 2 * m));
    svg.setAttribute("class", "qr");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "QR code: " + text);
    var bg = document.createElementNS(ns, "rect");
    bg.setAttribute("width", n + 2 * m); bg.setAttribute("height", n + 2 * m); bg.setAttribute("fill", "#fff");
    svg.appendChild(bg);
    var d = "";
    for (var r = 0; r < n; r++) { for (var c = 0; c < n; c++) { if (q.isDark(r, c)) { d += "M" + (c + m) + " " + (r + m) + "h1v1h-1z"; } } }
    var p = document.createElementNS(ns, "path");
    p.setAttribute("d", d); p.setAttribute("fill", "#000");
    svg.appendChild(p);
    return svg;
  }

  // ---- sign-in -----------------------------------------------------------------------
  function walletError(code, msg) { var e = new Error(msg); e.walletCode = code; return e; }
  // walletAddress asks the wallet for the address: TIP-1102 window.tron first, then
  // TronLink's older request method, then an already injected tronWeb.
  function walletAddress() {
    var tron = window.tron, link = window.tronLink;
    var fromTronWeb = function () {
      var tw = (tron && tron.tronWeb) || (link && link.tronWeb) || window.tronWeb;
      var a = tw && tw.defaultAddress && tw.defaultAddress.base58;
      if (!a) { throw walletError("locked"); }
      return a;
    };
    if (tron && typeof tron.request === "function") {
      return tron.request({ method: "eth_requestAccounts" }).then(function (accts) {
        if (Array.isArray(accts) && accts.length) { return accts[0]; }
        return fromTronWeb();
      });
    }
    if (link && typeof link.request === "function") {
      return link.request({ method: "tron_requestAccounts" }).then(function (res) {
        if (res && res.code === 4001) { throw walletError(4001); }
        return fromTronWeb();
      });
    }
    if (window.tronWeb) { return Promise.resolve().then(fromTronWeb); }
    return Promise.reject(walletError("missing"));
  }
  function tronWebFor() { return (window.tron && window.tron.tronWeb) || (window.tronLink && window.tronLink.tronWeb) || window.tronWeb; }
  function signIn(msgEl, btn) {
    btn.disabled = true;
    msgEl.className = "muted"; msgEl.textContent = T("signin.working");
    var address;
    walletAddress().then(function (a) {
      address = a;
      return api("POST", "/v1/accounts/challenge", { address: a, purpose: "login" });
    }).then(function (ch) {
      var tw = tronWebFor();
      if (!tw || !tw.trx || typeof tw.trx.signMessageV2 !== "function") { throw walletError("missing"); }
      return tw.trx.signMessageV2(ch.message).then(function (sig) { return { ch: ch, sig: sig }; });
    }).then(function (x) {
      return api("POST", "/v1/session", { address: address, nonce: x.ch.nonce, signature: x.sig });
    }).then(function (ss) {
      session = ss;
      start();
    }).catch(function (e) {
      btn.disabled = false;
      msgEl.className = "error";
      var code = e && (e.walletCode || e.code);
      if (code === "missing") { msgEl.textContent = T("signin.nowallet"); }
      else if (code === "locked") { msgEl.textContent = T("signin.locked"); }
      else if (code === 4001 || /reject|cancel|declin/i.test(typeof e === "string" ? e : String(e && e.message || ""))) { msgEl.textContent = T("signin.rejected"); }
      else if (e instanceof ApiError && e.code === 1010) { msgEl.textContent = T("signin.expired"); }
      else if (e instanceof ApiError || e instanceof NetError) { msgEl.textContent = errorText(e); }
      else { msgEl.textContent = T("signin.failed", { msg: String(e && e.message || e) }); }
    });
  }
  function signInScreen(note) {
    document.getElementById("nav").hidden = true;
    clear(document.getElementById("who"));
    var msg = h("p", { id: "signin-msg", role: "status", class: note ? "notice" : "muted", text: note || "" });
    var btn = h("button", { id: "signin", type: "button", class: "primary", text: T("signin.button") });
    btn.addEventListener("click", function () { signIn(msg, btn); });
    clear(main);
    add(main, h("section", { class: "card signin" }, h("h1", { text: T("signin.title") }), h("p", { text: T("signin.lead") }), btn, msg));
  }
  // sessionEnded keeps drafts and the current screen: the next sign-in returns to it.
  function sessionEnded() {
    session = null;
    signInScreen(T("signin.again"));
  }

  // ---- navigation --------------------------------------------------------------------
  var screens = [
    ["overview", "nav.overview", overview], ["orders", "nav.orders", orders], ["new", "nav.new", newOrder],
    ["keys", "nav.keys", keys], ["webhooks", "nav.webhooks", webhooks], ["subs", "nav.subs", subscriptions],
    ["market", "nav.market", market], ["security", "nav.security", security]
  ];
  function renderNav(cur) {
    var nav = clear(document.getElementById("nav"));
    nav.hidden = false;
    screens.forEach(function (s) {
      nav.appendChild(h("a", { href: "#" + s[0], "aria-current": s[0] === cur ? "page" : undefined, text: T(s[1]) }));
    });
    var who = clear(document.getElementById("who"));
    add(who, h("span", { class: "mono", title: session.address, text: short(session.address) }), " ",
      button(T("signout"), function () {
        api("DELETE", "/v1/session").then(function () { session = null; drafts = {}; signInScreen(); }, function (e) { toast(errorText(e)); });
      }, "small"));
  }
  function short(a) { return a && a.length > 12 ? a.slice(0, 6) + "…" + a.slice(-4) : a; }
  function route() {
    if (!session) { return; }
    var hash = location.hash.replace(/^#/, "") || "overview";
    var parts = hash.split("/");
    var name = parts[0];
    var s = screens.filter(function (x) { return x[0] === name; })[0];
    if (name === "order" && parts[1]) { renderNav("orders"); return screen(T("nav.orders"), function (box) { return orderDetail(box, decodeURIComponent(parts[1])); }); }
    if (!s) { s = screens[0]; }
    renderNav(s[0]);
    screen(T(s[1]), s[2]);
  }
  var renderSeq = 0;
  function screen(title, fn) {
    var seq = ++renderSeq;
    document.title = title + " · " + CFG.brand;
    clear(main);
    var box = h("section", { class: "screen" });
    add(main, box);
    box.appendChild(h("p", { class: "muted", text: T("loading") }));
    Promise.resolve().then(function () { return fn(box); }).catch(function (e) {
      if (seq !== renderSeq || !session) { return; }
      clear(box);
      add(box, h("h1", { text: title }), errorBox(e), button(T("retry"), route));
    });
  }
  function fill(box, title) {
    clear(box);
    box.appendChild(h("h1", { text: title }));
    return box;
  }

  // ---- Overview ----------------------------------------------------------------------
  function overview(box) {
    return Promise.all([api("GET", "/v1/account"), api("GET", "/v1/balance"), api("GET", "/v1/deposit-addresses")]).then(function (r) {
      var acct = r[0], bal = r[1], dep = r[2];
      fill(box, T("overview.title"));
      add(box, h("div", { class: "actions" }, button(T("refresh"), route, "small", "refresh-overview")));
      var t = acct.totals || {};
      add(box, h("div", { class: "grid" },
        h("div", { class: "card" },
          h("h2", { text: T("overview.available") }),
          h("p", { class: "big", id: "available-trx", text: sunToTRX(bal.available_sun) }),
          h("p", { class: "mono", id: "available-sun", text: group(bal.available_sun) + " SUN" }),
          h("dl", {},
            h("dt", { text: T("overview.total") }), h("dd", { id: "balance-sun", text: sunText(bal.balance_sun) }),
            h("dt", { text: T("overview.reserved") }), h("dd", { id: "reserved-sun", text: sunText(bal.reserved_sun) }),
            h("dt", { text: T("overview.usdt") }), h("dd", { text: microUSDT(bal.balance_usdt) }),
            h("dt", { text: T("overview.status") }), h("dd", { id: "account-status", text: acct.status }))),
        h("div", { class: "card" },
          h("h2", { text: T("overview.totals") }),
          h("dl", {},
            h("dt", { text: T("overview.deposited") }), h("dd", { text: sunText(t.deposited_sun || 0) }),
            h("dt", { text: T("overview.spent") }), h("dd", { text: sunText(t.spent_sun || 0) }),
            h("dt", { text: T("overview.refunded") }), h("dd", { text: sunText(t.refunded_sun || 0) }),
            h("dt", { text: T("overview.orders_created") }), h("dd", { text: group(t.orders_created || 0) }),
            h("dt", { text: T("overview.energy_delegated") }), h("dd", { text: group(t.energy_delegated || 0) }))),
        labelCard(acct)));
      add(box, h("h2", { text: T("deposit.title") }));
      var deps = h("div", { class: "grid" });
      (dep.data || []).forEach(function (d) { deps.appendChild(depositCard(d)); });
      box.appendChild(deps);
      add(box, h("h2", { text: T("deposit.retired") }));
      if (!dep.retired || !dep.retired.length) { add(box, h("p", { class: "muted", text: T("deposit.retired.none") })); }
      else {
        add(box, h("ul", {}, dep.retired.map(function (x) {
          return h("li", { text: T("deposit.retired.row", { address: x.address, at: when(x.retired_at), until: when(x.credited_until) }) });
        })));
      }
    });
  }
  function labelCard(acct) {
    var el = input("account-label", { type: "text", maxlength: "64", value: acct.label || "" });
    var msg = h("p", { role: "status" });
    return h("div", { class: "card" },
      h("h2", { text: T("overview.label") }),
      h("p", { id: "account-label-shown", text: acct.label || short(session.address) }),
      session.role === "owner" ? h("form", { id: "label-form", onsubmit: function (ev) {
        ev.preventDefault();
        api("PATCH", "/v1/account", { label: el.value === "" ? null : el.value }).then(function () {
          delete drafts["account-label"]; toast(T("overview.label.saved")); route();
        }, function (e) { clear(msg); add(msg, errorBox(e)); });
      } }, field(T("overview.label"), el), h("button", { type: "submit", text: T("overview.label.save") }), msg) : null);
  }
  function depositCard(d) {
    var rows = [h("dt", { text: T("deposit.confirmations", { n: d.confirmations_required }) }), h("dd")];
    var extra = [];
    if (d.currency === "USDT") {
      extra.push(h("p", { text: d.rate_now ? T("deposit.rate", { rate: d.rate_now.trx_per_usdt, source: d.rate_now.source }) : T("deposit.norate") }));
      if (d.spread_bps !== null && d.spread_bps !== undefined) { extra.push(h("p", { text: T("deposit.spread", { pct: (d.spread_bps / 100).toFixed(2) }) })); }
      if (d.min !== null && d.max !== null) { extra.push(h("p", { text: T("deposit.limits", { min: d.min, max: d.max }) })); }
      if (d.contract) { extra.push(h("p", { class: "mono small", text: T("deposit.contract", { c: d.contract }) })); }
    }
    return h("div", { class: "card deposit", "data-currency": d.currency },
      h("h3", { text: T("deposit.address", { cur: d.currency }) }),
      qrSVG(d.address),
      h("p", {}, h("code", { class: "address", "data-currency": d.currency, text: d.address }), " ", copyButton(d.address)),
      h("p", { class: "muted", text: T("deposit.confirmations", { n: d.confirmations_required }) }),
      extra);
  }

  // ---- Orders ------------------------------------------------------------------------
  var orderStatuses = ["created", "paid", "allocating", "delegated", "confirmed", "active", "expired", "reclaimed", "failed", "refunded"];
  function orders(box) {
    fill(box, T("orders.title"));
    var st = select("orders-status", [["", T("orders.all")]].concat(orderStatuses.map(function (s) { return [s, T("status." + s)]; })), "");
    var after = input("orders-after", { type: "date" }), before = input("orders-before", { type: "date" });
    var table = h("tbody"), more = h("div"), msg = h("div");
    var load = function (cursor) {
      var q = ["limit=20"];
      if (st.value) { q.push("status=" + encodeURIComponent(st.value)); }
      if (after.value) { q.push("created_after=" + encodeURIComponent(after.value + "T00:00:00.000Z")); }
      if (before.value) { q.push("created_before=" + encodeURIComponent(before.value + "T23:59:59.999Z")); }
      if (cursor) { q.push("cursor=" + encodeURIComponent(cursor)); } else { clear(table); }
      clear(more); clear(msg);
      return api("GET", "/v1/orders?" + q.join("&")).then(function (r) {
        if (!cursor && !r.data.length) { add(msg, h("p", { class: "muted", text: T("orders.none") })); }
        r.data.forEach(function (o) { table.appendChild(orderRow(o)); });
        if (r.next_cursor) { add(more, button(T("orders.more"), function () { load(r.next_cursor); })); }
      }, function (e) { add(msg, errorBox(e)); });
    };
    add(box, h("form", { class: "filters", onsubmit: function (ev) { ev.preventDefault(); load(); } },
      field(T("orders.status"), st), field(T("orders.after"), after), field(T("orders.before"), before),
      h("button", { type: "submit", text: T("orders.filter") })));
    add(box, h("div", { class: "scroll" }, h("table", { id: "orders-table" },
      h("thead", {}, h("tr", {}, [T("orders.id"), T("orders.created"), T("orders.status"), T("orders.resource"), T("orders.amount"), T("orders.total"), T("orders.receiver")].map(function (x) { return h("th", { scope: "col", text: x }); }))),
      table)), msg, more);
    return load();
  }
  function orderRow(o) {
    return h("tr", { "data-order": o.id, "data-status": o.status },
      h("td", {}, h("a", { href: "#order/" + encodeURIComponent(o.id), class: "mono", text: o.id })),
      h("td", { text: when(o.created_at) }),
      h("td", {}, h("span", { class: "badge " + o.status, text: T("status." + o.status) })),
      h("td", { text: o.resource + (o.tier ? " " + o.tier : "") }),
      h("td", { text: group(o.amount) }),
      h("td", { text: sunToTRX(o.total_amount_sun) }),
      h("td", { class: "mono", text: short(o.receiver) }));
  }
  // The customer's transaction an order of POST /v1/transactions relays (docs/orders.md
  // "Relayed transactions"): where it is, its block and result, with the explorer link.
  function relayedTransaction(t) {
    var ran = t.status === "confirmed" || t.status === "failed";
    return h("div", { class: "card", id: "order-transaction" }, h("h2", { text: T("order.tx.title") }), h("dl", {},
      h("dt", { text: T("order.tx.id") }), h("dd", {}, explorerLink(t.txid)),
      h("dt", { text: T("orders.status") }), h("dd", {}, h("span", { id: "order-tx-status", class: "badge tx-" + t.status, text: T("order.tx." + t.status) })),
      h("dt", { text: T("order.tx.block") }), h("dd", { text: t.block === null ? "–" : group(t.block) }),
      h("dt", { text: T("order.tx.result") }), h("dd", { text: t.result || "–" }),
      h("dt", { text: T("order.tx.energy") }), h("dd", { text: ran ? group(t.energy_used) : "–" }),
      h("dt", { text: T("order.tx.burnt") }), h("dd", { text: ran ? sunText(t.energy_fee_sun) : "–" })));
  }
  function orderDetail(box, id) {
    return api("GET", "/v1/orders/" + encodeURIComponent(id)).then(function (o) {
      fill(box, T("order.title", { id: o.id }));
      add(box, h("p", {}, h("a", { href: "#orders", text: T("order.back") })));
      var steps = [[T("order.accepted"), o.created_at]];
      if (o.delegated_at) { steps.push([T("order.delegated"), o.delegated_at]); }
      if (["confirmed", "active", "expired", "reclaimed", "refunded"].indexOf(o.status) >= 0) { steps.push([T("order.confirmed"), null]); }
      if (o.status === "active") { steps.push([T("order.active", { t: when(o.expires_at) }), null]); }
      if (o.status === "expired") { steps.push([T("order.expired"), o.expires_at]); }
      if (o.status === "reclaimed") { steps.push([T("order.reclaimed"), o.updated_at]); }
      if (o.status === "refunded") { steps.push([T("order.refunded"), o.updated_at]); }
      if (o.failure) { steps.push([T("order.failed", { code: o.failure.code, slug: o.failure.slug }) + (o.failure.message ? ": " + o.failure.message : ""), o.updated_at]); }
      if (o.refunded_amount_sun) { steps.push([T("order.refund", { amt: sunText(o.refunded_amount_sun) }), null]); }
      add(box, h("div", { class: "grid" },
        h("div", { class: "card" }, h("dl", {},
          h("dt", { text: T("orders.status") }), h("dd", {}, h("span", { id: "order-status", class: "badge " + o.status, text: T("status." + o.status) })),
          h("dt", { text: T("orders.resource") }), h("dd", { text: o.resource }),
          h("dt", { text: T("orders.amount") }), h("dd", { text: group(o.amount) }),
          h("dt", { text: T("order.tier") }), h("dd", { text: o.tier || "–" }),
          h("dt", { text: T("orders.receiver") }), h("dd", { class: "mono", text: o.receiver }),
          h("dt", { text: T("order.unit") }), h("dd", { text: String(o.unit_price_sun) + " SUN" }),
          h("dt", { text: T("orders.total") }), h("dd", { text: sunText(o.total_amount_sun) }),
          h("dt", { text: T("order.charged") }), h("dd", { text: sunText(o.charged_amount_sun) }),
          h("dt", { text: T("order.filled_by") }), h("dd", { text: o.filled_by || "–" }))),
        h("div", { class: "card" }, h("h2", { text: T("order.timeline") }),
          h("ol", { class: "timeline" }, steps.map(function (s) { return h("li", {}, h("strong", { text: s[0] }), s[1] ? " " + when(s[1]) : ""); })),
          o.delegate_hashes && o.delegate_hashes.length ? h("div", {}, h("h3", { text: T("order.hashes") }),
            h("ul", {}, o.delegate_hashes.map(function (x) { return h("li", {}, explorerLink(x)); }))) : null)));
      if (o.transaction) { add(box, relayedTransaction(o.transaction)); }
      var msg = h("div");
      if (["created", "paid", "allocating", "delegated", "confirmed", "active"].indexOf(o.status) >= 0 && session.role !== "viewer") {
        add(box, button(T("order.reclaim"), function (ev) {
          if (!window.confirm(T("order.reclaim.confirm"))) { return; }
          ev.target.disabled = true;
          api("POST", "/v1/orders/" + encodeURIComponent(o.id) + "/reclaim").then(function () { toast(T("order.reclaim.sent")); route(); },
            function (e) { ev.target.disabled = false; clear(msg); add(msg, errorBox(e)); });
        }, "danger"), msg);
      }
      add(box, button(T("refresh"), route, "small", "refresh-order"));
    });
  }

  // ---- New order ---------------------------------------------------------------------
  // pending is the order being placed: its client_order_id is made once per set of form
  // values and reused on every retry of the same values, so a double click or a network
  // error never places (or charges) two orders.
  var pending = null;
  function randomID() {
    var b = new Uint8Array(12);
    crypto.getRandomValues(b);
    return "dash-" + Array.prototype.map.call(b, function (x) { return ("0" + x.toString(16)).slice(-2); }).join("");
  }
  function newOrder(box) {
    return api("GET", "/v1/prices").then(function (prices) { renderNewOrder(box, prices); }, function () { renderNewOrder(box, null); });
  }
  function renderNewOrder(box, prices) {
    fill(box, T("new.title"));
    var tiers = [["5m", "5m"], ["1h", "1h"]];
    if (prices && prices.items) {
      var seen = {};
      tiers = [];
      prices.items.forEach(function (it) { if (it.available !== false && it.tier && !seen[it.tier]) { seen[it.tier] = 1; tiers.push([it.tier, it.tier]); } });
    }
    var res = select("new-resource", [["energy", "energy"], ["bandwidth", "bandwidth"], ["activation", "activation"]], "energy");
    var amount = input("new-amount", { type: "number", min: "1", step: "1", inputmode: "numeric", value: "65000" });
    var tier = select("new-tier", tiers, tiers.length ? tiers[0][0] : "");
    var recv = input("new-receiver", { type: "text", spellcheck: "false", autocomplete: "off", placeholder: "T…", class: "mono" });
    var act = input("new-activate", { type: "checkbox" });
    var est = h("div", { id: "estimate", class: "card", "aria-live": "polite" });
    var msg = h("div", { id: "new-msg" });
    var submit = h("button", { type: "submit", class: "primary", id: "place-order", text: T("new.submit") });
    var values = function () {
      var v = { resource: res.value, receiver: recv.value.trim() };
      if (res.value !== "activation") { v.amount = parseInt(amount.value, 10); v.tier = tier.value; }
      if (act.checked) { v.activate = true; }
      return v;
    };
    var timer = null, estSeq = 0;
    var estimate = function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        var v = values(), seq = ++estSeq;
        if (v.resource !== "activation" && !(v.amount > 0)) { clear(est); return; }
        clear(est); add(est, h("p", { class: "muted", text: T("new.estimating") }));
        var q = "resource=" + v.resource + "&amount=" + (v.amount || 1) + "&tier=" + encodeURIComponent(v.tier || "1h") + (/^T[1-9A-HJ-NP-Za-km-z]{33}$/.test(v.receiver) ? "&receiver=" + v.receiver : "");
        var calls = [api("GET", "/v1/estimate?" + q)];
        if (v.resource !== "activation") { calls.push(api("GET", "/v1/orderbook?resource=" + v.resource + "&tier=" + encodeURIComponent(v.tier) + "&amount=" + v.amount).catch(function () { return null; })); }
        Promise.all(calls).then(function (r) {
          if (seq !== estSeq) { return; }
          var e = r[0], b = r[1];
          clear(est);
          add(est, h("h2", { text: T("new.estimate") }), h("dl", {},
            h("dt", { text: T("order.unit") }), h("dd", { text: e.price_sun_per_unit + " SUN" }),
            h("dt", { text: T("orders.total") }), h("dd", { id: "estimate-total", text: sunText(e.total_amount_sun) })));
          if (b && b.walk) {
            add(est, h("h3", { text: T("new.walk") }), h("ul", {}, (b.walk.fills || []).map(function (f) {
              return h("li", { text: group(f.amount) + " @ " + f.price_sun + " SUN (" + f.class + ")" });
            })));
            if (!b.walk.complete) { add(est, h("p", { class: "error", text: T("new.walk.incomplete", { out: group(b.walk.outstanding) }) })); }
            if (b.cheaper_from) { add(est, h("p", { class: "muted", text: T("new.cheaper", { t: when(b.cheaper_from) }) })); }
          }
        }, function (e) { if (seq === estSeq) { clear(est); add(est, errorBox(e)); } });
      }, 250);
    };
    [res, amount, tier, recv, act].forEach(function (el) { el.addEventListener("input", estimate); el.addEventListener("change", estimate); });
    var form = h("form", { id: "new-order", onsubmit: function (ev) {
      ev.preventDefault();
      var v = values(), key = JSON.stringify(v);
      if (!pending || pending.key !== key) { pending = { key: key, id: randomID() }; }
      var body = Object.assign({ client_order_id: pending.id }, v);
      submit.disabled = true; clear(msg); add(msg, h("p", { class: "muted", text: T("new.placing") }));
      api("POST", "/v1/orders", body).then(function (o) {
        pending = null;
        ["new-receiver", "new-amount", "new-activate"].forEach(function (k) { delete drafts[k]; });
        toast(T("new.placed", { id: o.id }));
        location.hash = "#order/" + encodeURIComponent(o.id);
      }, function (e) {
        submit.disabled = false; clear(msg);
        if (e instanceof NetError) { add(msg, h("p", { class: "error", role: "alert", text: T("new.retry") })); return; }
        // A refusal stores nothing (docs/orders.md): the same id may be sent again, but a
        // 3010 means the id belongs to another order, so the next attempt gets a new one.
        if (e.code === 3010) { pending = null; }
        add(msg, errorBox(e));
      });
    } },
    field(T("new.resource"), res), field(T("new.amount"), amount), field(T("new.tier"), tier), field(T("new.receiver"), recv),
    h("div", { class: "field check" }, act, h("label", { for: "new-activate", text: T("new.activate") })),
    submit, msg);
    add(box, h("div", { class: "grid" }, h("div", { class: "card" }, form), est));
    estimate();
  }

  // ---- API keys ----------------------------------------------------------------------
  var allScopes = ["account.read", "account.write", "api_keys.read", "api_keys.write", "deposits.read", "orders.read", "orders.write",
    "batches.read", "batches.write", "quotes.read", "quotes.write", "estimates.read", "subscriptions.read", "subscriptions.write",
    "webhooks.read", "webhooks.write"];
  // secretBox shows a secret once: it is in this element only, never in storage or the URL.
  function secretBox(id, secret, warn) {
    var box = h("div", { class: "card secret", id: id, role: "alert" },
      h("h2", { text: T("keys.secret.title") }), h("p", { text: warn }),
      h("p", {}, h("code", { class: "mono secret-value", text: secret }), " ", copyButton(secret)));
    box.appendChild(button(T("keys.secret.done"), function () { box.remove(); }, "secret-done"));
    return box;
  }
  function keys(box) {
    return api("GET", "/v1/api-keys").then(function (r) {
      fill(box, T("keys.title"));
      var slot = h("div", { id: "secret-slot" });
      box.appendChild(slot);
      var list = h("tbody");
      (r.data || []).forEach(function (k) {
        list.appendChild(h("tr", { "data-key": k.id },
          h("td", { class: "mono", text: k.id }), h("td", { text: k.label || "" }), h("td", { text: (k.scopes || []).join(", ") }),
          h("td", { text: k.status }), h("td", { text: when(k.expires_at) }), h("td", { text: when(k.last_used_at) }),
          h("td", {}, button(k.is_active ? T("keys.deactivate") : T("keys.activate"), function () {
            api("PATCH", "/v1/api-keys/" + encodeURIComponent(k.id), { is_active: !k.is_active }).then(route, function (e) { toast(errorText(e)); });
          }, "small"), " ", button(T("keys.delete"), function () {
            if (!window.confirm(T("keys.delete.confirm", { id: k.id }))) { return; }
            api("DELETE", "/v1/api-keys/" + encodeURIComponent(k.id)).then(route, function (e) { toast(errorText(e)); });
          }, "small danger"))));
      });
      add(box, r.data && r.data.length ? h("div", { class: "scroll" }, h("table", { id: "keys-table" },
        h("thead", {}, h("tr", {}, [T("keys.id"), T("keys.label"), T("keys.col.scopes"), T("keys.status"), T("keys.col.expires"), T("keys.lastused"), ""].map(function (x) { return h("th", { scope: "col", text: x }); }))), list))
        : h("p", { class: "muted", text: T("keys.none") }));
      var checks = allScopes.map(function (s) {
        return h("label", { class: "check" }, input("scope-" + s, { type: "checkbox", value: s }), " ", s);
      });
      var label = input("key-label", { type: "text", maxlength: "100" });
      var ips = input("key-ips", { tag: "textarea", rows: "3", class: "mono" });
      var exp = input("key-expires", { type: "datetime-local" });
      var msg = h("div");
      add(box, h("h2", { text: T("keys.create") }), h("form", { id: "key-form", class: "card", onsubmit: function (ev) {
        ev.preventDefault();
        var scopes = allScopes.filter(function (s) { return document.getElementById("scope-" + s).checked; });
        clear(msg);
        if (!scopes.length) { add(msg, h("p", { class: "error", text: T("keys.noscope") })); return; }
        var body = { scopes: scopes };
        if (label.value) { body.label = label.value; }
        var list = ips.value.split(/\s+/).filter(Boolean);
        if (list.length) { body.ip_allowlist = list; }
        if (exp.value) { body.expires_at = new Date(exp.value).toISOString(); }
        api("POST", "/v1/api-keys", body).then(function (k) {
          Object.keys(drafts).forEach(function (d) { if (d.indexOf("scope-") === 0 || d.indexOf("key-") === 0) { delete drafts[d]; } });
          return keys(box).then(function () {
            var s = document.getElementById("secret-slot");
            add(s, secretBox("key-secret", k.secret, T("keys.secret.warn")));
            s.scrollIntoView();
          });
        }, function (e) { add(msg, errorBox(e)); });
      } }, h("fieldset", {}, h("legend", { text: T("keys.scopes") }), h("div", { class: "scopes" }, checks)),
      field(T("keys.label"), label), field(T("keys.ips"), ips), field(T("keys.expires"), exp),
      h("button", { type: "submit", class: "primary", text: T("keys.create") }), msg));
    });
  }

  // ---- Webhooks ----------------------------------------------------------------------
  function webhooks(box) {
    return api("GET", "/v1/webhooks").then(function (r) {
      fill(box, T("hooks.title"));
      var slot = h("div", { id: "hook-secret-slot" });
      box.appendChild(slot);
      var hooks = r.data || [];
      if (!hooks.length) { add(box, h("p", { class: "muted", text: T("hooks.none") })); }
      hooks.forEach(function (w) {
        var out = h("div", { class: "hook-out" });
        var other = w.role === "primary" ? "backup" : "primary";
        add(box, h("div", { class: "card hook", "data-hook": w.id, "data-role": w.role },
          h("h2", {}, h("span", { class: "badge", text: w.role }), " ", h("span", { class: "mono url", text: w.url })),
          h("p", { class: "muted", text: (w.is_active ? T("hooks.active") : T("hooks.inactive")) + " · " + (w.events ? w.events.join(", ") : T("hooks.allevents")) }),
          h("div", { class: "actions" },
            button(T("hooks.test"), function (ev) {
              ev.target.disabled = true;
              api("POST", "/v1/webhooks/" + encodeURIComponent(w.id) + "/test", {}).then(function (t) {
                ev.target.disabled = false;
                clear(out);
                add(out, h("p", { class: t.delivered ? "ok test-result" : "error test-result",
                  text: T("hooks.tested", { result: t.delivered ? T("hooks.ok") : T("hooks.fail", { err: t.error }), code: t.status_code === null ? "–" : t.status_code, ms: t.latency_ms }) }),
                  h("p", { text: T("hooks.test.body") }), h("pre", { class: "test-body", text: t.response_body || "" }));
              }, function (e) { ev.target.disabled = false; clear(out); add(out, errorBox(e)); });
            }),
            button(T("hooks.rotate"), function () {
              if (!window.confirm(T("hooks.rotate.confirm"))) { return; }
              api("POST", "/v1/webhooks/" + encodeURIComponent(w.id) + "/rotate-secret").then(function (x) {
                clear(slot); add(slot, secretBox("hook-secret", x.secret, T("hooks.secret.warn")));
              }, function (e) { toast(errorText(e)); });
            }),
            button(T("hooks.swap", { role: other }), function () {
              api("PATCH", "/v1/webhooks/" + encodeURIComponent(w.id), { role: other }).then(route, function (e) { toast(errorText(e)); });
            }),
            button(T("hooks.history"), function () {
              api("GET", "/v1/webhooks/" + encodeURIComponent(w.id) + "/deliveries?limit=20").then(function (d) {
                clear(out);
                if (!d.data || !d.data.length) { add(out, h("p", { class: "muted", text: T("hooks.nohistory") })); return; }
                add(out, h("div", { class: "scroll" }, h("table", {}, h("tbody", {}, d.data.map(function (a) {
                  return h("tr", {}, h("td", { text: when(a.attempted_at) }), h("td", { text: a.event }), h("td", { text: "#" + a.attempt }),
                    h("td", { text: a.status }), h("td", { text: a.status_code === null ? "–" : String(a.status_code) }), h("td", { text: a.error || "" }), h("td", { text: a.next }));
                })))));
              }, function (e) { clear(out); add(out, errorBox(e)); });
            }),
            button(T("hooks.delete"), function () {
              if (!window.confirm(T("hooks.delete.confirm"))) { return; }
              api("DELETE", "/v1/webhooks/" + encodeURIComponent(w.id)).then(route, function (e) { toast(errorText(e)); });
            }, "danger")),
          out));
      });
      if (hooks.length < 2) {
        var url = input("hook-url", { type: "url", placeholder: "https://", class: "mono" });
        var taken = hooks.map(function (w) { return w.role; });
        var role = select("hook-role", ["primary", "backup"].filter(function (x) { return taken.indexOf(x) < 0; }).map(function (x) { return [x, x]; }));
        var msg = h("div");
        add(box, h("form", { id: "hook-form", class: "card", onsubmit: function (ev) {
          ev.preventDefault(); clear(msg);
          api("POST", "/v1/webhooks", { url: url.value.trim(), role: role.value }).then(function (w) {
            delete drafts["hook-url"];
            return webhooks(box).then(function () {
              add(document.getElementById("hook-secret-slot"), secretBox("hook-secret", w.secret, T("hooks.secret.warn")));
            });
          }, function (e) { add(msg, errorBox(e)); });
        } }, field(T("hooks.url"), url), field(T("hooks.role"), role), h("button", { type: "submit", class: "primary", text: T("hooks.register") }), msg));
      }
    });
  }

  // ---- Subscriptions -----------------------------------------------------------------
  function subscriptions(box) {
    return Promise.all([api("GET", "/v1/subscriptions/plans"), api("GET", "/v1/subscriptions")]).then(function (r) {
      var plans = r[0], subs = r[1];
      fill(box, T("subs.title"));
      add(box, h("h2", { text: T("subs.plans") }));
      if (!plans.available) { add(box, h("p", { class: "notice", text: T("subs.unavailable") })); }
      add(box, h("div", { class: "grid" }, (plans.data || []).map(function (p) {
        return h("div", { class: "card" }, h("h3", { text: p.name }), h("p", { text: T("subs.perday", { fee: p.fee_trx_per_day }) }),
          h("p", { class: "muted", text: T("subs.rule", { reserve: group(p.reserve), low: group(p.low), high: group(p.high) }) }),
          h("ul", {}, (p.average_price || []).map(function (a) {
            return h("li", { text: T("subs.avg", { n: a.uses_per_day, trx: a.average_trx === null ? "–" : a.average_trx }) });
          })));
      })));
      var list = subs.data || [];
      add(box, h("h2", { text: T("subs.title") }));
      if (!list.length) { add(box, h("p", { class: "muted", text: T("subs.none") })); }
      list.forEach(function (s) {
        var out = h("div");
        var act = function (method, body) {
          return api(method, "/v1/subscriptions/" + encodeURIComponent(s.id), body).then(route, function (e) { clear(out); add(out, errorBox(e)); });
        };
        add(box, h("div", { class: "card", "data-sub": s.id },
          h("h3", {}, h("span", { class: "mono", text: s.address || s.receiver }), " ", h("span", { class: "badge " + s.status, text: s.status })),
          h("p", { class: "muted", text: (s.preset || T("subs.custom")) + (s.reserve ? " · " + T("subs.rule", { reserve: group(s.reserve), low: group(s.low), high: group(s.high) }) : "") + " · " + T("subs.fee", { fee: sunText(s.daily_fee_sun) }) }),
          h("div", { class: "actions" },
            s.status === "active" ? button(T("subs.pause"), function () { act("PATCH", { status: "paused" }); }) : null,
            s.status === "paused" ? button(T("subs.resume"), function () { act("PATCH", { status: "active" }); }) : null,
            s.status !== "cancelled" ? button(T("subs.cancel"), function () { if (window.confirm(T("subs.cancel.confirm"))) { act("DELETE"); } }, "danger") : null,
            button(T("subs.events"), function () {
              api("GET", "/v1/subscriptions/" + encodeURIComponent(s.id)).then(function (one) {
                clear(out);
                var ev = one.events || [];
                add(out, ev.length ? h("ul", {}, ev.map(function (e) {
                  return h("li", { text: when(e.ts) + " " + e.kind + (e.energy_delta !== null && e.energy_delta !== undefined ? " " + group(e.energy_delta) + " energy" : "") + (e.amount_sun ? " " + sunText(e.amount_sun) : "") });
                })) : h("p", { class: "muted", text: T("subs.noevents") }));
              }, function (e) { clear(out); add(out, errorBox(e)); });
            })), out));
      });
      subForm(box, plans);
    });
  }
  function subForm(box, plans) {
    var L = plans.limits || { reserve_min: 131000, reserve_max: 5240000, step: 1000, low_min: 65000, gap_min: 65000 };
    var addr = input("sub-address", { type: "text", class: "mono", placeholder: "T…" });
    var preset = select("sub-preset", (plans.data || []).map(function (p) { return [p.slug, p.name]; }).concat([["", T("subs.custom")]]), (plans.data && plans.data[0] && plans.data[0].slug) || "");
    var reserve = input("sub-reserve", { type: "number", step: String(L.step) }), low = input("sub-low", { type: "number", step: String(L.step) }), high = input("sub-high", { type: "number", step: String(L.step) });
    var custom = h("div", { class: "custom" }, field(T("subs.reserve"), reserve), field(T("subs.low"), low), field(T("subs.high"), high));
    var check = h("p", { id: "sub-check", "aria-live": "polite" }), msg = h("div");
    // validate mirrors the plan limits of GET /v1/subscriptions/plans; the server decides.
    var validate = function () {
      custom.hidden = preset.value !== "";
      if (preset.value) { check.textContent = ""; return true; }
      var R = +reserve.value, lo = +low.value, hi = +high.value, v = [];
      if (!(R >= L.reserve_min && R <= L.reserve_max)) { v.push(T("subs.v.reserve", { min: group(L.reserve_min), max: group(L.reserve_max) })); }
      if (R % L.step || lo % L.step || hi % L.step) { v.push(T("subs.v.step", { step: group(L.step) })); }
      var basic = R === L.reserve_min && lo === R && hi === R;
      if (!basic) {
        if (lo < L.low_min) { v.push(T("subs.v.low", { min: group(L.low_min) })); }
        if (!(hi > lo && hi <= R)) { v.push(T("subs.v.high")); }
        if (hi - lo < L.gap_min) { v.push(T("subs.v.gap", { gap: group(L.gap_min) })); }
      }
      check.className = v.length ? "error" : "ok";
      check.textContent = v.length ? v.join("; ") : T("subs.rule.ok", { fee: Math.ceil(R * 6 / 131000) });
      return !v.length;
    };
    [preset, reserve, low, high].forEach(function (el) { el.addEventListener("input", validate); el.addEventListener("change", validate); });
    add(box, h("h2", { text: T("subs.create") }), h("form", { id: "sub-form", class: "card", onsubmit: function (ev) {
      ev.preventDefault(); clear(msg);
      if (!validate()) { return; }
      var body = preset.value ? { address: addr.value.trim(), preset: preset.value } : { address: addr.value.trim(), reserve: +reserve.value, low: +low.value, high: +high.value };
      api("POST", "/v1/subscriptions", body).then(function () {
        ["sub-address", "sub-reserve", "sub-low", "sub-high"].forEach(function (k) { delete drafts[k]; });
        route();
      }, function (e) { add(msg, errorBox(e)); });
    } }, field(T("subs.address"), addr), field(T("subs.preset"), preset), custom, check,
    h("button", { type: "submit", class: "primary", disabled: plans.available ? undefined : true, text: T("subs.create") }), msg));
    validate();
  }

  // ---- Market ------------------------------------------------------------------------
  function market(box) {
    var opt = function (p) { return p.catch(function () { return null; }); };
    return Promise.all([api("GET", "/v1/prices?resource=energy"), opt(api("GET", "/v1/market"))]).then(function (r) {
      var prices = r[0], board = r[1];
      fill(box, T("market.title"));
      add(box, h("h2", { text: T("market.schedule") }));
      var nowMin = new Date().getUTCHours() * 60 + new Date().getUTCMinutes();
      add(box, h("div", { class: "scroll" }, h("table", { id: "schedule" }, h("tbody", {}, (prices.schedule || []).map(function (s) {
        var hm = function (m) { return ("0" + Math.floor(m / 60)).slice(-2) + ":" + ("0" + m % 60).slice(-2); };
        var cur = nowMin >= s.start_utc_minute && nowMin < s.end_utc_minute;
        return h("tr", { class: cur ? "current" : "" }, h("td", { text: s.label }), h("td", { text: hm(s.start_utc_minute) + "–" + hm(s.end_utc_minute) }),
          h("td", { text: s.price_sun_per_unit === null ? T("market.paused") : s.price_sun_per_unit + " SUN" }), h("td", { text: cur ? T("market.now") : "" }));
      })))));
      add(box, h("h2", { text: T("market.board") }));
      var boardBox = h("div", { id: "market-board" });
      box.appendChild(boardBox);
      if (!board) { add(boardBox, h("p", { class: "muted", text: T("market.na") })); return; }
      add(boardBox, h("div", { class: "scroll" }, h("table", {},
        h("thead", {}, h("tr", {}, [T("market.provider"), T("market.price1h"), T("market.savings"), T("market.avail")].map(function (x) { return h("th", { scope: "col", text: x }); }))),
        h("tbody", {}, (board.providers || []).map(function (p) {
          return h("tr", { class: p.stale ? "stale" : "" }, h("td", { text: (p.rank ? p.rank + ". " : "") + p.name }), h("td", { text: p.price_sun_1h === null ? "–" : String(p.price_sun_1h) }),
            h("td", { text: p.savings_pct === null ? "–" : Math.round(p.savings_pct * 100) + " %" }), h("td", { text: group(p.available_energy) }));
        })))));
      // The chart follows this service's own row (slug = brand), else the cheapest provider.
      var own = (board.providers || []).filter(function (p) { return p.slug === CFG.brand; })[0] || (board.providers || [])[0];
      if (!own) { return; }
      var hours = 1;
      return opt(api("GET", "/v1/market/history?slug=" + encodeURIComponent(own.slug) + "&hours=" + hours)).then(function (hist) {
        add(boardBox, h("h3", { text: T("market.chart", { h: hours, slug: own.name }) }));
        if (!hist) { add(boardBox, h("p", { class: "muted", text: T("market.na") })); return; }
        add(boardBox, chart(hist.points || []));
      });
    });
  }
  function chart(points) {
    var pts = points.filter(function (p) { return p.price_sun_1h !== null; });
    if (pts.length < 2) { return h("p", { class: "muted", text: T("market.nopoints") }); }
    var ns = "http://www.w3.org/2000/svg", W = 600, H = 200, pad = 30;
    var xs = pts.map(function (p) { return new Date(p.ts).getTime(); }), ys = pts.map(function (p) { return p.price_sun_1h; });
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs), y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    if (x1 === x0) { x1 = x0 + 1; }
    if (y1 === y0) { y1 = y0 + 1; }
    var X = function (x) { return pad + (x - x0) / (x1 - x0) * (W - 2 * pad); }, Y = function (y) { return H - pad - (y - y0) / (y1 - y0) * (H - 2 * pad); };
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + H); svg.setAttribute("class", "chart"); svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "1 h price from " + y0 + " to " + y1 + " SUN");
    var path = document.createElementNS(ns, "polyline");
    path.setAttribute("points", pts.map(function (p, i) { return X(xs[i]).toFixed(1) + "," + Y(ys[i]).toFixed(1); }).join(" "));
    path.setAttribute("class", "line");
    svg.appendChild(path);
    [[y1, Y(y1)], [y0, Y(y0)]].forEach(function (l) {
      var t = document.createElementNS(ns, "text");
      t.setAttribute("x", "2"); t.setAttribute("y", String(l[1] + 4)); t.setAttribute("class", "axis");
      t.textContent = String(l[0]);
      svg.appendChild(t);
    });
    return svg;
  }

  // ---- Sign-ins ----------------------------------------------------------------------
  function security(box) {
    return api("GET", "/v1/session/history").then(function (r) {
      fill(box, T("security.title"));
      add(box, h("p", { text: T("security.session", { role: session.role, until: when(session.expires_at) }) }));
      add(box, h("h2", { text: T("security.history") }), h("div", { class: "scroll" }, h("table", { id: "history" },
        h("thead", {}, h("tr", {}, [T("security.when"), T("security.ip"), T("security.address")].map(function (x) { return h("th", { scope: "col", text: x }); }))),
        h("tbody", {}, (r.data || []).map(function (s) {
          return h("tr", {}, h("td", { text: when(s.signed_in_at) }), h("td", { text: s.ip }), h("td", { class: "mono", text: s.address }));
        })))));
      add(box, h("div", { class: "actions" }, button(T("signout.all"), function () {
        if (!window.confirm(T("signout.all.confirm"))) { return; }
        api("POST", "/v1/session/revoke-all").then(function () { session = null; drafts = {}; signInScreen(); }, function (e) { toast(errorText(e)); });
      }, "danger", "revoke-all")));
    });
  }

  // ---- start -------------------------------------------------------------------------
  function start() {
    if (!session) { return; }
    route();
  }
  function boot() {
    document.getElementById("brand").textContent = CFG.brand;
    if (CFG.network === "nile") {
      var b = document.getElementById("banner");
      b.textContent = T("nile");
      b.hidden = false;
    }
    window.addEventListener("hashchange", route);
    // Keep the session alive while the page is used: refresh before the idle deadline.
    setInterval(function () { if (session) { api("POST", "/v1/session/refresh").then(function (s) { if (s) { session = s; } }, function () {}); } }, 10 * 60 * 1000);
    fetch("/v1/session", { credentials: "same-origin", headers: { "Accept": "application/json" } }).then(function (r) {
      if (r.status !== 200) { signInScreen(); return; }
      return r.json().then(function (s) { session = s; start(); });
    }, function () { signInScreen(); });
  }
  boot();
}());
