// The self-test manager: runs an algorithm's known-answer vectors through its
// transform under several buffer layouts (the kernel's testmgr configs) and
// reports the first mismatch. Called by the registry before an algorithm
// becomes visible, and by `blkcrypt selftest`.
#include "alg_record.hpp"

#include <blkcrypt/hex.hpp>
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/testvec.hpp>
#include <blkcrypt/registry.hpp>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace blkcrypt {
namespace {

using Buf = std::vector<uint8_t>;

// How a request's buffers are laid out: segment sizes (0 = the rest) for src
// and dst, in place or not, and a misaligning start offset.
struct Layout {
    const char* name;
    bool in_place;
    std::size_t offset;
    std::vector<std::size_t> src_splits;
    std::vector<std::size_t> dst_splits;
    bool full_only;
};

const std::vector<Layout>& layouts() {
    static const std::vector<Layout> l = {
        {"out-of-place", false, 0, {}, {}, false},
        {"in-place, split inside a block", true, 0, {1, 15, 17, 3, 31}, {}, false},
        {"in-place", true, 0, {}, {}, true},
        {"out-of-place, unaligned start", false, 1, {}, {}, true},
        {"out-of-place, uneven splits", false, 3, {7, 9, 1, 30, 2}, {13, 2, 50, 1}, true},
        {"byte by byte", false, 0, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
         {}, true},
    };
    return l;
}

// Memory for one side of a request, cut into segments as a layout says.
struct Side {
    Buf mem;
    std::vector<SgEntry> sg;

    Side(ConstBytes content, std::size_t offset, const std::vector<std::size_t>& splits) {
        mem.assign(offset + content.size() + 1, 0xa5);
        std::copy(content.begin(), content.end(), mem.begin() + offset);
        std::size_t pos = offset, end = offset + content.size();
        for (std::size_t s : splits) {
            if (pos >= end) break;
            std::size_t n = std::min(s, end - pos);
            sg.push_back({mem.data() + pos, n});
            pos += n;
        }
        if (pos < end || sg.empty()) sg.push_back({mem.data() + pos, end - pos});
    }
    Buf content(std::size_t n) const {
        Buf out(n);
        sg_gather(sg, 0, out);
        return out;
    }
};

// At most 32 bytes of a value, for failure messages.
std::string hex(ConstBytes b) {
    return hex_encode(b.first(std::min<std::size_t>(b.size(), 32))) + (b.size() > 32 ? "..." : "");
}

std::string mismatch(const char* what, ConstBytes got, ConstBytes want) {
    return std::string(what) + " mismatch: got " + hex(got) + ", want " + hex(want);
}

// What the vector's setkey outcome means. nullopt: go on testing; a string
// ends the test with it ("" when a key the vector marks bad was refused).
std::optional<std::string> key_outcome(Status s, const TestVector& v) {
    if (v.number("setkey_fails")) return s == Status::Ok ? "setkey accepted a bad key" : "";
    if (s != Status::Ok) return std::string("setkey failed: ") + to_string(s);
    return std::nullopt;
}

// ---- cipher --------------------------------------------------------------
std::string test_cipher(const CipherAlg& alg, const TestVector& v) {
    auto tfm = alg.create_tfm();
    if (auto end = key_outcome(tfm->setkey(v.bytes("key")), v)) return *end;
    Buf pt = v.bytes("ptext"), ct = v.bytes("ctext");
    std::size_t bs = alg.info().blocksize;
    if (pt.size() != ct.size() || pt.size() % bs) return "vector is not whole blocks";
    Buf out(pt.size());
    tfm->encrypt(pt.data(), out.data(), pt.size() / bs);
    if (out != ct) return mismatch("ciphertext", out, ct);
    for (std::size_t i = 0; i < out.size(); i += bs) tfm->decrypt(out.data() + i, out.data() + i, 1);
    if (out != pt) return mismatch("plaintext (block by block, in place)", out, pt);
    return "";
}

// ---- skcipher ------------------------------------------------------------
Status run_sync(const SkcipherTfm& tfm, SkcipherRequest& req, bool enc) {
    CryptoWait w;
    req.complete = w.callback();
    req.flags = kMayBacklog;
    return w.wait(enc ? tfm.encrypt(req) : tfm.decrypt(req));
}

std::string skcipher_one(const SkcipherTfm& tfm, const Layout& l, bool enc, const Buf& in,
                         const Buf& want, const Buf& iv0, const TestVector& v) {
    Side src(in, l.offset, l.src_splits);
    Side dst_mem(Buf(in.size(), 0), l.offset + 2, l.dst_splits.empty() ? l.src_splits : l.dst_splits);
    Side& dst = l.in_place ? src : dst_mem;
    Buf iv = iv0;
    SkcipherRequest req;
    req.src = src.sg;
    req.dst = dst.sg;
    req.len = in.size();
    req.iv = iv;
    Status s = run_sync(tfm, req, enc);
    if (s != Status::Ok) return std::string(enc ? "encrypt" : "decrypt") + " failed: " + to_string(s);
    Buf got = dst.content(in.size());
    if (got != want) return mismatch(enc ? "ciphertext" : "plaintext", got, want);
    if (v.has("iv_out") && iv != v.bytes("iv_out")) return mismatch("output IV", iv, v.bytes("iv_out"));
    return "";
}

std::string test_skcipher(const SkcipherAlg& alg, const TestVector& v, bool full) {
    auto tfm = alg.create_tfm();
    if (v.has("sector_size") || v.has("key_count") || v.has("iv_large_sectors")) {
        SectorParams p;
        p.sector_size = v.number("sector_size", 512);
        p.iv_large_sectors = v.number("iv_large_sectors") != 0;
        p.key_count = static_cast<unsigned>(v.number("key_count", 1));
        if (Status s = tfm->set_sector_params(p); s != Status::Ok)
            return std::string("set_sector_params failed: ") + to_string(s);
    }
    if (auto end = key_outcome(tfm->setkey(v.bytes("key")), v)) return *end;
    Buf pt = v.bytes("ptext"), ct = v.bytes("ctext"), iv = v.bytes("iv");
    if (iv.size() < alg.info().ivsize) return "vector IV shorter than ivsize";
    for (const Layout& l : layouts()) {
        if (l.full_only && !full) continue;
        for (bool enc : {true, false}) {
            std::string e = skcipher_one(*tfm, l, enc, enc ? pt : ct, enc ? ct : pt, iv, v);
            if (!e.empty()) return std::string(l.name) + ": " + e;
        }
    }
    return "";
}

// ---- aead ----------------------------------------------------------------
std::string test_aead(const AeadAlg& alg, const TestVector& v, bool full) {
    auto tfm = alg.create_tfm();
    if (auto end = key_outcome(tfm->setkey(v.bytes("key")), v)) return *end;
    Buf pt = v.bytes("ptext"), ct = v.bytes("ctext"), ad = v.bytes("assoc"), iv = v.bytes("iv");
    bool novrfy = v.number("novrfy") != 0;
    std::size_t authsize = v.number("authsize", novrfy ? 0 : ct.size() - pt.size());
    if (tfm->setauthsize(authsize) != Status::Ok) return "setauthsize(" + std::to_string(authsize) + ") failed";
    for (const Layout& l : layouts()) {
        if (l.full_only && !full) continue;
        for (bool enc : {true, false}) {
            if (enc && novrfy) continue;
            Buf in = ad, want = ad;
            in.insert(in.end(), enc ? pt.begin() : ct.begin(), enc ? pt.end() : ct.end());
            if (!novrfy) want.insert(want.end(), enc ? ct.begin() : pt.begin(), enc ? ct.end() : pt.end());
            std::size_t outlen = ad.size() + (enc ? pt.size() + authsize : ct.size() - authsize);
            if (novrfy) outlen = ad.size() + (ct.size() >= authsize ? ct.size() - authsize : 0);
            Buf big = in;
            big.resize(std::max(in.size(), outlen) + authsize, 0);
            Side src(l.in_place ? ConstBytes(big) : ConstBytes(in), l.offset, l.src_splits);
            Side dst_mem(Buf(outlen, 0), l.offset + 2, l.dst_splits.empty() ? l.src_splits : l.dst_splits);
            Side& dst = l.in_place ? src : dst_mem;
            Buf ivc = iv;
            AeadRequest req;
            req.src = src.sg;
            req.dst = dst.sg;
            req.assoclen = ad.size();
            req.cryptlen = enc ? pt.size() : ct.size();
            req.iv = ivc;
            CryptoWait w;
            req.complete = w.callback();
            req.flags = kMayBacklog;
            const Status s = w.wait(enc ? tfm->encrypt(req, authsize) : tfm->decrypt(req, authsize));
            if (novrfy) {
                if (s != Status::BadMsg)
                    return std::string(l.name) + ": forged tag was not rejected (" + to_string(s) + ")";
                continue;
            }
            if (s != Status::Ok)
                return std::string(l.name) + ": " + (enc ? "encrypt" : "decrypt") + " failed: " + to_string(s);
            Buf got = dst.content(outlen);
            if (got != want)
                return std::string(l.name) + ": " + mismatch(enc ? "ciphertext" : "plaintext", got, want);
        }
    }
    return "";
}

// ---- shash ---------------------------------------------------------------
Buf message(const TestVector& v) {
    Buf m = v.bytes("msg");
    std::size_t rep = v.number("repeat", 1);
    Buf out;
    out.reserve(m.size() * rep);
    for (std::size_t i = 0; i < rep; ++i) out.insert(out.end(), m.begin(), m.end());
    return out;
}

std::string test_shash(const ShashAlg& alg, const TestVector& v, bool full) {
    if (v.number("repeat", 1) > 1 && !full) return "";
    auto tfm = alg.create_tfm();
    if (v.has("key"))
        if (auto end = key_outcome(tfm->setkey(v.bytes("key")), v)) return *end;
    const std::size_t ds = alg.info().digestsize;
    Buf msg = message(v), want = v.bytes("digest"), got(ds);
    if (want.size() != ds) return "vector digest size differs from digestsize";
    tfm->digest(msg, got);
    if (got != want) return "digest: " + mismatch("digest", got, want);
    // In pieces whose sizes straddle the usual block sizes.
    auto st = tfm->new_state();
    st->init();
    std::size_t pos = 0, k = 0;
    static const std::size_t pieces[] = {1, 63, 64, 65, 3, 127, 128, 129, 7};
    while (pos < msg.size()) {
        std::size_t n = std::min(pieces[k++ % 9], msg.size() - pos);
        st->update(ConstBytes(msg).subspan(pos, n));
        pos += n;
    }
    st->final(got);
    if (got != want) return "update in pieces: " + mismatch("digest", got, want);
    // Export half way, import into a fresh state, finish there.
    if (std::size_t ss = alg.info().statesize) {
        std::size_t half = msg.size() / 2;
        auto a = tfm->new_state();
        a->init();
        a->update(ConstBytes(msg).first(half));
        Buf state(ss);
        a->export_state(state);
        auto b = tfm->new_state();
        if (b->import_state(state) != Status::Ok) return "import_state rejected an exported state";
        b->finup(ConstBytes(msg).subspan(half), got);
        if (got != want) return "export/import: " + mismatch("digest", got, want);
    }
    return "";
}

// ---- ahash ---------------------------------------------------------------
Status run_sync(const AhashTfm& tfm, AhashRequest& req, Status (AhashTfm::*op)(AhashRequest&) const) {
    CryptoWait w;
    req.complete = w.callback();
    req.flags = kMayBacklog;
    return w.wait((tfm.*op)(req));
}

std::string test_ahash(const AhashAlg& alg, const TestVector& v, bool full) {
    if (v.number("repeat", 1) > 1 && !full) return "";
    auto tfm = alg.create_tfm();
    if (v.has("key"))
        if (auto end = key_outcome(tfm->setkey(v.bytes("key")), v)) return *end;
    const std::size_t ds = alg.info().digestsize;
    Buf msg = message(v), want = v.bytes("digest"), got(ds);
    for (const Layout& l : layouts()) {
        if (l.full_only && !full) continue;
        Side src(msg, l.offset, l.src_splits);
        AhashRequest req(tfm->new_state());
        req.src = src.sg;
        req.nbytes = msg.size();
        req.result = got;
        std::fill(got.begin(), got.end(), 0);
        Status s = run_sync(*tfm, req, &AhashTfm::digest);
        if (s != Status::Ok) return std::string(l.name) + ": digest failed: " + to_string(s);
        if (got != want) return std::string(l.name) + ": " + mismatch("digest", got, want);
        // init, update (first half), finup (second half)
        std::size_t half = msg.size() / 2;
        std::vector<SgEntry> a(src.sg.size()), b(src.sg.size());
        std::fill(got.begin(), got.end(), 0);
        s = run_sync(*tfm, req, &AhashTfm::init);
        req.src = sg_slice(src.sg, 0, half, a);
        req.nbytes = half;
        if (s == Status::Ok) s = run_sync(*tfm, req, &AhashTfm::update);
        req.src = sg_slice(src.sg, half, msg.size() - half, b);
        req.nbytes = msg.size() - half;
        if (s == Status::Ok) s = run_sync(*tfm, req, &AhashTfm::finup);
        if (s != Status::Ok) return std::string(l.name) + ": init/update/finup failed: " + to_string(s);
        if (got != want) return std::string(l.name) + ": init/update/finup: " + mismatch("digest", got, want);
    }
    return "";
}

// ---- vector checks -------------------------------------------------------
// The raw transforms assume what the public handles check (a key where one is
// needed, IVs of ivsize, lengths that fit); a vector from a plugin may be
// malformed, so every vector is held against the algorithm's sizes first.
constexpr std::size_t kMaxVectorBytes = std::size_t{1} << 26;  // a repeated msg at most 64 MiB

std::string check_key(const AlgInfo& in, const TestVector& v) {
    if (!v.has("key")) {
        if (in.needs_key) return "no key, but '" + in.driver + "' needs one";
        return "";
    }
    // Templates with extra key material (IV modes, authenc) leave the limits at 0.
    const std::size_t n = v.bytes("key").size();
    if (in.max_keysize && !v.has("key_count") && (n < in.min_keysize || n > in.max_keysize))
        return "key of " + std::to_string(n) + " bytes outside " + std::to_string(in.min_keysize) +
               ".." + std::to_string(in.max_keysize);
    return "";
}

std::string check_vector(const AlgInfo& in, const TestVector& v) {
    // A setkey that must fail: nothing else of the vector is used.
    if (v.number("setkey_fails")) return v.has("key") ? "" : "setkey_fails without a key";
    if (std::string e = check_key(in, v); !e.empty()) return e;
    const std::size_t pt = v.bytes("ptext").size(), ct = v.bytes("ctext").size();
    const std::size_t iv = v.bytes("iv").size();
    auto too_short_iv = [&] {
        return "IV of " + std::to_string(iv) + " bytes, ivsize is " + std::to_string(in.ivsize);
    };
    switch (in.type) {
    case AlgType::Cipher:
        if (pt != ct || in.blocksize == 0 || pt % in.blocksize) return "ptext/ctext are not whole blocks";
        break;
    case AlgType::Skcipher:
        if (iv < in.ivsize) return too_short_iv();
        if (pt != ct) return "ptext and ctext differ in length";
        if (v.has("iv_out") && v.bytes("iv_out").size() != iv) return "iv_out and iv differ in length";
        break;
    case AlgType::Aead: {
        if (iv < in.ivsize) return too_short_iv();
        const bool novrfy = v.number("novrfy") != 0;
        if (!novrfy && ct < pt) return "ctext shorter than ptext (no room for a tag)";
        const std::size_t as = v.number("authsize", novrfy ? 0 : ct - pt);
        if (as > in.maxauthsize)
            return "authsize " + std::to_string(as) + " above maxauthsize " + std::to_string(in.maxauthsize);
        if (!novrfy && ct - pt != as) return "ctext is not ptext plus authsize bytes";
        if (novrfy && ct < as) return "ctext shorter than authsize";
        break;
    }
    case AlgType::Shash:
    case AlgType::Ahash: {
        const std::size_t d = v.bytes("digest").size();
        if (d != in.digestsize)
            return "digest of " + std::to_string(d) + " bytes, digestsize is " + std::to_string(in.digestsize);
        const std::size_t m = v.bytes("msg").size(), rep = v.number("repeat", 1);
        if (m && rep > kMaxVectorBytes / m) return "repeated msg too large";
        break;
    }
    }
    return "";
}

std::string run_one(const Alg& alg, const TestVector& v, bool full) {
    if (std::string e = check_vector(alg.info(), v); !e.empty()) return "malformed vector: " + e;
    switch (alg.info().type) {
    case AlgType::Cipher: return test_cipher(static_cast<const CipherAlg&>(alg), v);
    case AlgType::Skcipher: return test_skcipher(static_cast<const SkcipherAlg&>(alg), v, full);
    case AlgType::Aead: return test_aead(static_cast<const AeadAlg&>(alg), v, full);
    case AlgType::Shash: return test_shash(static_cast<const ShashAlg&>(alg), v, full);
    case AlgType::Ahash: return test_ahash(static_cast<const AhashAlg&>(alg), v, full);
    }
    return "unknown algorithm type";
}

}  // namespace

SelftestOutcome run_test_vectors(const Alg& alg, const std::vector<TestVector>& vecs, bool full) {
    std::size_t ran = 0;
    for (const auto& v : vecs) {
        std::string e;
        try {
            e = run_one(alg, v, full);
        } catch (const std::exception& ex) {
            e = std::string("exception: ") + ex.what();
        }
        if (!e.empty()) return {SelftestState::Failed, v.where + ": " + e};
        ++ran;
    }
    return {SelftestState::Passed, std::to_string(ran) + " vectors" + (full ? " (full)" : "")};
}

SelftestOutcome run_testmgr(Registry& reg, const Alg& alg, bool full) {
    const std::string& test_name = detail::record_of(alg).test_name;
    const std::string& name = test_name.empty() ? alg.info().name : test_name;
    const auto vecs = find_vectors(reg, name);  // shared: a plugin may remove its vectors meanwhile
    if (!vecs || vecs->empty()) return {SelftestState::NoVectors, "no vectors for '" + name + "'"};
    return run_test_vectors(alg, *vecs, full);
}

}  // namespace blkcrypt
