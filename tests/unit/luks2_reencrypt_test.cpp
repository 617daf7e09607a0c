// LUKS2 reencryption metadata against cryptsetup 2.6.1: the headers its
// `reencrypt --init-only` writes (tests/golden/reencrypt, record.sh there)
// parsed and their verification digest recomputed; the mangled metadata of
// its tests/luks2-reencryption-mangle-test refused; and, run live when
// cryptsetup is installed, headers we initialise (and step, and finish)
// taken up by `cryptsetup reencrypt --resume-only`, the plaintext intact.
#include "paths.hpp"
#include "test_util.hpp"
#include "tmp_dir.hpp"
#include "torn_store.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/luks/reencrypt.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <stdlib.h>

using namespace blkcrypt;
using namespace blkcrypt::luks;
using testutil::registry;
using testutil::text;
using json = nlohmann::ordered_json;

namespace {

// Big buffers compared without Catch printing them on a failure.
bool same(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) { return a == b; }

const std::vector<uint8_t> kOldKey(64, 'A'), kNewKey(64, 'B');  // record.sh's --volume-key-file keys

// Keys for data: XTS keys of two equal halves are refused by OpenSSL 3
// (cryptsetup's userspace cipher), so the live tests use these.
std::vector<uint8_t> counting_key(uint8_t from) {
    std::vector<uint8_t> k(64);
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(from + i);
    return k;
}
const std::vector<uint8_t> kDataOld = counting_key(0), kDataNew = counting_key(100);

std::vector<uint8_t> gunzip(const std::string& path) {
    std::vector<uint8_t> out;
    FILE* f = ::popen(("gzip -dc '" + path + "'").c_str(), "r");
    REQUIRE(f != nullptr);
    uint8_t buf[65536];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.insert(out.end(), buf, buf + n);
    REQUIRE(::pclose(f) == 0);
    return out;
}

std::vector<uint8_t> fixture(const std::string& name) {
    return gunzip(std::string(testutil::kSourceDir) + "/tests/golden/reencrypt/" + name + ".hdr.gz");
}

// The metadata in use; both copies must be intact unless `torn_ok`.
luks2::Metadata metadata_of(std::vector<uint8_t> image, bool torn_ok = false) {
    MemoryStore s(0);
    s.data() = std::move(image);
    Result<luks2::Header> h = luks2::read_header(registry(), s);
    REQUIRE(h.ok());
    CHECK((torn_ok || h->primary_ok));
    CHECK((torn_ok || h->secondary_ok));
    return h->md;
}

// The header of `image` with its JSON replaced by edit(json), both copies
// rewritten with fresh checksums but no validation (as the mangle test's
// img_update_json does).
std::vector<uint8_t> mangled(const std::vector<uint8_t>& image, const std::function<void(json&)>& edit) {
    const luks2::Metadata md = metadata_of(image);
    json root = json::parse(md.json);
    edit(root);
    std::vector<uint8_t> out = image;
    for (int c = 0; c < 2; ++c) {
        Result<std::vector<uint8_t>> copy = luks2::build_copy(registry(), md.hdr, c == 1, root.dump());
        REQUIRE(copy.ok());
        std::copy(copy->begin(), copy->end(), out.begin() + static_cast<std::ptrdiff_t>(c * md.hdr.hdr_size));
    }
    return out;
}

// Whether we take `image`'s reencryption as cryptsetup's repair does:
// metadata valid, reencryption state valid, verification digest matching.
bool accepted(const std::vector<uint8_t>& image, const std::vector<uint8_t>& vk_old,
              const std::vector<uint8_t>& vk_new) {
    MemoryStore s(0);
    s.data() = image;
    Result<luks2::Header> h = luks2::read_header(registry(), s);
    if (!h) return false;
    Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(h->md);
    if (!st || !*st || (*st)->repair_needed) return false;
    return luks2::reencrypt_verify(registry(), h->md, **st, vk_old, vk_new).ok();
}

using testutil::have_cryptsetup;

struct TmpDir : testutil::TmpDir {
    TmpDir() : testutil::TmpDir("blkcrypt-reenc") {}
};

constexpr uint64_t kImage = 16u << 20, kDataOffset = 2u << 20;

// Our own LUKS2 image of `size` bytes (pbkdf2 at 1000, 16 KiB metadata,
// 1 MiB keyslots, data at 2 MiB, 4 KiB sectors) holding `plain`.
std::vector<uint8_t> our_image(const std::vector<uint8_t>& plain, uint64_t size = kImage) {
    auto s = std::make_shared<MemoryStore>(size);
    luks2::FormatOptions fo;
    fo.pbkdf = "pbkdf2";
    fo.iterations = 1000;
    fo.keyslots_size = 1u << 20;
    fo.data_offset = kDataOffset;
    fo.volume_key = kDataOld;
    Result<luks::Volume> v = luks2::format(registry(), *s, text("pass"), fo);
    REQUIRE(v.ok());
    Result<std::unique_ptr<dm::CryptTarget>> t = dm::CryptTarget::create(registry(), v->table, s);
    REQUIRE(t.ok());
    std::vector<uint8_t> buf = plain;
    dm::Bio bio;
    bio.dir = dm::BioDir::Write;
    bio.vecs.push_back(SgEntry{buf.data(), buf.size()});
    REQUIRE((*t)->submit_sync(bio) == Status::Ok);
    return s->data();
}

// The data of `image` read through the segment a passphrase opens, and
// that segment's volume key.
std::vector<uint8_t> plaintext(const std::vector<uint8_t>& image, std::vector<uint8_t>* key = nullptr) {
    auto s = std::make_shared<MemoryStore>(0);
    s->data() = image;
    Result<luks::Volume> v = luks2::open(registry(), *s, text("pass"));
    REQUIRE(v.ok());
    if (key) key->assign(v->table.key.data(), v->table.key.data() + v->table.key.size());
    Result<std::unique_ptr<dm::CryptTarget>> t = dm::CryptTarget::create(registry(), v->table, s);
    REQUIRE(t.ok());
    std::vector<uint8_t> buf(kImage - kDataOffset);
    dm::Bio bio;
    bio.dir = dm::BioDir::Read;
    bio.vecs.push_back(SgEntry{buf.data(), buf.size()});
    REQUIRE((*t)->submit_sync(bio) == Status::Ok);
    return buf;
}

// Re-encrypts [done0, done1) of the data from the old to the new key
// (same cipher and sector size): the data part of a step, for the tests.
void rekey_range(std::vector<uint8_t>& image, uint64_t done0, uint64_t done1) {
    std::vector<uint8_t> buf(done1 - done0);
    for (int pass = 0; pass < 2; ++pass) {
        auto s = std::make_shared<MemoryStore>(0);
        s->data() = image;
        Result<dm::CryptTable> tbl = dm::parse_cipher_spec("aes-xts-plain64");
        REQUIRE(tbl.ok());
        tbl->key.assign(pass == 0 ? kDataOld : kDataNew);
        tbl->sector_size = 4096;
        tbl->offset = (kDataOffset + done0) / 512;
        tbl->iv_offset = done0 / 512;
        Result<std::unique_ptr<dm::CryptTarget>> t =
            dm::CryptTarget::create(registry(), *tbl, s, (done1 - done0) / 512);
        REQUIRE(t.ok());
        dm::Bio bio;
        bio.dir = pass == 0 ? dm::BioDir::Read : dm::BioDir::Write;
        bio.vecs.push_back(SgEntry{buf.data(), buf.size()});
        REQUIRE((*t)->submit_sync(bio) == Status::Ok);
        t->reset();  // the target's queued work is done before the store is read
        image = s->data();
    }
}

// --pbkdf-force-iterations: cryptsetup's digests skip their benchmark (a
// second per run otherwise).
std::vector<uint8_t> image_with_plain(std::vector<uint8_t>& plain, uint64_t image_size, const char* resilience);

const char* kCsFlags = "-q --disable-locks --force-offline-reencrypt --pbkdf pbkdf2 --pbkdf-force-iterations 1000";

}  // namespace

TEST_CASE("luks2 reencrypt: cryptsetup's --init-only headers parse and their digest is recomputed", "[reencrypt]") {
    struct Case {
        const char* name;
        int version;
        const char* mode;
        const char* direction;
        const char* area;
        bool old_key, new_key, moved;
    };
    const Case cases[] = {
        {"checksum", 2, "reencrypt", "forward", "checksum", true, true, false},
        {"journal", 2, "reencrypt", "forward", "journal", true, true, false},
        {"none", 2, "reencrypt", "forward", "none", true, true, false},
        {"encrypt-datashift", 2, "encrypt", "backward", "datashift", false, true, true},
        {"decrypt-datashift-checksum", 3, "decrypt", "forward", "datashift-checksum", true, false, true},
    };
    for (const Case& c : cases) {
        INFO(c.name);
        const std::vector<uint8_t> img = fixture(c.name);
        const luks2::Metadata md = metadata_of(img);
        Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(md);
        REQUIRE(st.ok());
        REQUIRE(st->has_value());
        const luks2::ReencryptState& r = **st;
        CHECK(r.version == c.version);
        CHECK(r.mode == c.mode);
        CHECK(r.direction == c.direction);
        CHECK(r.area_type == c.area);
        CHECK_FALSE(r.crashed);
        CHECK_FALSE(r.repair_needed);
        CHECK((r.digest_old >= 0) == c.old_key);
        CHECK((r.digest_new >= 0) == c.new_key);
        CHECK((r.seg_moved >= 0) == c.moved);
        if (r.area_type == "checksum") {
            CHECK(r.hash == "sha256");
            CHECK(r.hash_block == 4096);
        }
        if (c.moved) CHECK(r.shift_size > 0);
        const std::vector<uint8_t> none;
        const auto& vo = c.old_key ? kOldKey : none;
        const auto& vn = c.new_key ? kNewKey : none;
        CHECK(luks2::reencrypt_verify(registry(), md, r, vo, vn).ok());
        // Another key, or the keys swapped, is not cryptsetup's digest.
        std::vector<uint8_t> other = c.old_key ? kOldKey : kNewKey;
        other[5] ^= 1;
        CHECK_FALSE(luks2::reencrypt_verify(registry(), md, r, c.old_key ? other : vo, c.old_key ? vn : other).ok());
        if (c.old_key && c.new_key) CHECK_FALSE(luks2::reencrypt_verify(registry(), md, r, vn, vo).ok());
    }
    // A header without reencryption has no state.
    MemoryStore plain(0);
    plain.data() = our_image(std::vector<uint8_t>(kImage - kDataOffset, 0));
    Result<luks2::Header> h = luks2::read_header(registry(), plain);
    REQUIRE(h.ok());
    Result<std::optional<luks2::ReencryptState>> none = luks2::reencrypt_state(h->md);
    REQUIRE(none.ok());
    CHECK_FALSE(none->has_value());
}

namespace {

using Edit = std::function<void(json&)>;
enum class Verdict { Refused, RepairNeeded, Ok };
struct Mangle {
    const char* what;
    Edit edit;
    Verdict verdict;
};

// cryptsetup's luks2-reencryption-mangle-test cases (and a few more), on a
// header as `reencrypt --init-only --resilience none` leaves it: keyslots 0
// old, 1 new, 2 reencrypt; digests likewise; segments 0 the data, 1
// backup-previous, 2 backup-final.
std::vector<Mangle> mangles() {
    return {
        {"unknown requirement", [](json& j) { j["config"]["requirements"]["mandatory"] = {"online-reencryptx"}; },
         Verdict::Refused},
        {"legacy requirement, no digest",
         [](json& j) {
             j["digests"].erase("2");
             j["config"]["requirements"]["mandatory"] = {"online-reencrypt"};
         },
         Verdict::RepairNeeded},
        {"no reencryption digest", [](json& j) { j["digests"].erase("2"); }, Verdict::RepairNeeded},
        {"area type checksum",
         [](json& j) {
             j["keyslots"]["2"]["area"]["type"] = "checksum";
             j["keyslots"]["2"]["area"]["hash"] = "sha256";
             j["keyslots"]["2"]["area"]["sector_size"] = 4096;
         },
         Verdict::Refused},
        {"area type journal", [](json& j) { j["keyslots"]["2"]["area"]["type"] = "journal"; }, Verdict::Refused},
        {"mode decrypt", [](json& j) { j["keyslots"]["2"]["mode"] = "decrypt"; }, Verdict::Refused},
        {"direction backward", [](json& j) { j["keyslots"]["2"]["direction"] = "backward"; }, Verdict::Refused},
        {"key_size 16", [](json& j) { j["keyslots"]["2"]["key_size"] = 16; }, Verdict::Refused},
        {"no backup-previous segment", [](json& j) { j["segments"].erase("1"); }, Verdict::Refused},
        {"segment 0 cipher", [](json& j) { j["segments"]["0"]["encryption"] = "aes-cbc-null"; }, Verdict::Refused},
        {"segment 1 cipher", [](json& j) { j["segments"]["1"]["encryption"] = "aes-cbc-null"; }, Verdict::Refused},
        {"segment 2 cipher", [](json& j) { j["segments"]["2"]["encryption"] = "aes-cbc-null"; }, Verdict::Refused},
        {"digest 2 copied from digest 0",
         [](json& j) {
             j["digests"]["2"] = j["digests"]["0"];
             j["digests"]["2"]["keyslots"] = {"2"};
             j["digests"]["2"]["segments"] = json::array();
         },
         Verdict::Refused},
        {"digest 2 iterations", [](json& j) { j["digests"]["2"]["iterations"] = 1111; }, Verdict::Refused},
        {"requirement removed", [](json& j) { j["config"]["requirements"]["mandatory"] = json::array(); },
         Verdict::Refused},
        {"unknown area type", [](json& j) { j["keyslots"]["2"]["area"]["type"] = "noop"; }, Verdict::Refused},
        {"checksum sector_size 1000",
         [](json& j) {
             j["keyslots"]["2"]["area"]["type"] = "checksum";
             j["keyslots"]["2"]["area"]["hash"] = "sha256";
             j["keyslots"]["2"]["area"]["sector_size"] = 1000;
         },
         Verdict::Refused},
        {"correct progress (1 MiB done)",
         [](json& j) {
             const json s0 = j["segments"]["0"], s1 = j["segments"]["1"], s2 = j["segments"]["2"];
             json a = s0, b = s0;
             a["size"] = std::to_string(1u << 20);
             b["offset"] = std::to_string(std::stoull(s0["offset"].get<std::string>()) + (1u << 20));
             b["iv_tweak"] = std::to_string((1u << 20) / 512);
             j["segments"] = {{"0", a}, {"1", b}, {"2", s1}, {"3", s2}};
             j["digests"]["0"]["segments"] = {"1", "2"};
             j["digests"]["1"]["segments"] = {"0", "3"};
         },
         Verdict::Ok},
        {"reencrypt keyslot without priority", [](json& j) { j["keyslots"]["2"].erase("priority"); }, Verdict::Ok},
        {"unknown segment flag", [](json& j) { j["segments"]["0"]["flags"] = {"dead-parrot"}; }, Verdict::Ok},
    };
}

// Our verdict on image: refused (metadata or state invalid, digest
// mismatch), repair needed, or accepted.
Verdict our_verdict(const std::vector<uint8_t>& image, const std::vector<uint8_t>& vk_old,
                    const std::vector<uint8_t>& vk_new) {
    MemoryStore s(0);
    s.data() = image;
    Result<luks2::Header> h = luks2::read_header(registry(), s);
    if (!h) return Verdict::Refused;
    Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(h->md);
    if (!st || !*st) return Verdict::Refused;
    if ((*st)->repair_needed) {
        CHECK_FALSE(luks2::reencrypt_verify(registry(), h->md, **st, vk_old, vk_new).ok());
        return Verdict::RepairNeeded;
    }
    return luks2::reencrypt_verify(registry(), h->md, **st, vk_old, vk_new).ok() ? Verdict::Ok : Verdict::Refused;
}

}  // namespace

TEST_CASE("luks2 reencrypt: luks2-reencryption-mangle-test's metadata is refused as cryptsetup refuses it", "[reencrypt]") {
    const std::vector<uint8_t> img = fixture("none");
    REQUIRE(accepted(img, kOldKey, kNewKey));
    for (const Mangle& m : mangles()) {
        INFO(m.what);
        CHECK(our_verdict(mangled(img, m.edit), kOldKey, kNewKey) == m.verdict);
    }
    // The datashift case: a halved shift_size breaks the digest.
    const std::vector<uint8_t> enc = fixture("encrypt-datashift");
    CHECK(accepted(enc, {}, kNewKey));
    CHECK_FALSE(accepted(mangled(enc,
                                 [](json& j) {
                                     for (auto& [k, ks] : j["keyslots"].items())
                                         if (ks["type"] == "reencrypt") ks["area"]["shift_size"] = "2097152";
                                 }),
                         {}, kNewKey));
}

TEST_CASE("luks2 reencrypt: init refuses what it cannot start and writes nothing then", "[reencrypt]") {
    const std::vector<uint8_t> plain(kImage - kDataOffset, 0x5a);
    const std::vector<uint8_t> img = our_image(plain);
    luks2::ReencryptInitOptions o;
    o.keyslot.pbkdf = "pbkdf2";
    o.keyslot.iterations = 1000;
    {
        // cryptsetup refuses every integrity profile; we re-key them, but not
        // with checksums (a block torn between its data and its tag is
        // neither key's), nor to a tag size or sector size the dm-integrity
        // device was not formatted with.
        std::vector<uint8_t> integ = mangled(img, [](json& j) {
            j["segments"]["0"]["integrity"] = {
                {"type", "hmac(sha256)"}, {"journal_encryption", "none"}, {"journal_integrity", "none"}};
        });
        auto refused = [&](const luks2::ReencryptInitOptions& oo, std::string_view words) {
            MemoryStore s(0);
            s.data() = integ;
            Result<luks2::ReencryptState> r = luks2::reencrypt_init(registry(), s, text("pass"), oo);
            CHECK(r.status() == Status::Unsupported);
            if (!r) CHECK(r.error().message.find(words) != std::string::npos);
            CHECK(same(s.data(), integ));
        };
        INFO("an integrity profile with checksum resilience");
        refused(o, "Resilience checksum cannot protect a device with an integrity profile");
        luks2::ReencryptInitOptions j = o;
        j.resilience = "journal";
        j.cipher = "aes-xts-random";
        INFO("an integrity profile and a cipher with other tags");
        refused(j, "needs 48-byte tags; the dm-integrity device keeps 32-byte ones");
        j.cipher.clear();
        j.sector_size = 512;  // the image has 4096
        INFO("an integrity profile and a new sector size");
        refused(j, "fixed at format");
    }
    {
        INFO("a wrong passphrase");
        MemoryStore s(0);
        s.data() = img;
        CHECK(luks2::reencrypt_init(registry(), s, text("wrong"), o).status() == Status::NoKey);
        CHECK(same(s.data(), img));
    }
    {
        INFO("a reencryption already initialised");
        MemoryStore s(0);
        s.data() = img;
        REQUIRE(luks2::reencrypt_init(registry(), s, text("pass"), o).ok());
        const std::vector<uint8_t> once = s.data();
        CHECK_FALSE(luks2::reencrypt_init(registry(), s, text("pass"), o).ok());
        CHECK(same(s.data(), once));
    }
}

TEST_CASE("luks2 reencrypt: cryptsetup resumes and finishes a reencryption we initialise", "[reencrypt]") {
    if (!have_cryptsetup()) {
        WARN("cryptsetup not installed: the live resume is not checked");
        return;
    }
    std::vector<uint8_t> plain(kImage - kDataOffset);
    for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
    const std::vector<uint8_t> img = our_image(plain);
    for (const char* resilience : {"checksum", "journal", "none"}) {
        INFO(resilience);
        MemoryStore s(0);
        s.data() = img;
        luks2::ReencryptInitOptions o;
        o.resilience = resilience;
        o.keyslot.pbkdf = "pbkdf2";
        o.keyslot.iterations = 1000;
        o.new_key = kDataNew;
        Result<luks2::ReencryptState> st = luks2::reencrypt_init(registry(), s, text("pass"), o);
        REQUIRE(st.ok());
        CHECK(st->area_type == resilience);
        CHECK(accepted(s.data(), kDataOld, kDataNew));
        // The keys come back from the passphrase.
        {
            Result<luks2::Header> h = luks2::read_header(registry(), s);
            REQUIRE(h.ok());
            CHECK(h->md.hdr.seqid == 2);
            Result<luks2::ReencryptKeys> k = luks2::reencrypt_unlock(registry(), s, h->md, *st, text("pass"));
            REQUIRE(k.ok());
            CHECK(std::vector<uint8_t>(k->old_key.data(), k->old_key.data() + k->old_key.size()) == kDataOld);
            CHECK(std::vector<uint8_t>(k->new_key.data(), k->new_key.data() + k->new_key.size()) == kDataNew);
        }
        TmpDir d;
        d.put("img", s.data());
        d.put("pw", std::vector<uint8_t>{'p', 'a', 's', 's'});
        REQUIRE(d.run(std::string("cryptsetup reencrypt ") + kCsFlags + " --resume-only --key-file pw img") == 0);
        CHECK(d.run("cryptsetup open --test-passphrase --key-file pw img") == 0);
        std::vector<uint8_t> key;
        CHECK(same(plaintext(d.get("img"), &key), plain));
        CHECK(key == kDataNew);
    }
}

TEST_CASE("luks2 reencrypt: cryptsetup resumes our step's segment map, and our finish is a clean LUKS2 header", "[reencrypt]") {
    std::vector<uint8_t> plain(kImage - kDataOffset);
    for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<uint8_t>(i * 40503u >> 7);
    std::vector<uint8_t> img = our_image(plain);
    luks2::ReencryptInitOptions o;
    o.resilience = "checksum";
    o.keyslot.pbkdf = "pbkdf2";
    o.keyslot.iterations = 1000;
    o.new_key = kDataNew;
    {
        MemoryStore s(0);
        s.data() = img;
        REQUIRE(luks2::reencrypt_init(registry(), s, text("pass"), o).ok());
        img = s.data();
    }
    const uint64_t data = kImage - kDataOffset, done = 5u << 20;
    // One step's data (first 5 MiB) then its metadata: new | old.
    rekey_range(img, 0, done);
    {
        MemoryStore s(0);
        s.data() = img;
        const luks2::Metadata md = metadata_of(img);
        Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(md);
        REQUIRE(st.ok());
        REQUIRE(st->has_value());
        // The map a crash mid-step leaves: new | hot | old, the hot one in both digests.
        Result<std::string> hot = luks2::reencrypt_progress_json(md, **st, data, done, 1u << 20);
        REQUIRE(hot.ok());
        const json hj = json::parse(*hot);
        CHECK(hj["segments"].size() == 5);
        CHECK(hj["segments"]["1"]["flags"] == json::array({"in-reencryption"}));
        CHECK(hj["segments"]["1"]["iv_tweak"] == std::to_string(done / 512));
        CHECK(hj["segments"]["2"]["offset"] == std::to_string(kDataOffset + done + (1u << 20)));
        REQUIRE(luks2::reencrypt_write_progress(registry(), s, md, **st, data, done, 0).ok());
        img = s.data();
        const luks2::Metadata md2 = metadata_of(img);
        CHECK(md2.hdr.seqid == md.hdr.seqid + 1);
        CHECK(md2.segments.size() == 4);
        CHECK(md2.segments.at(0).size == done);
        CHECK(md2.segments.at(1).iv_tweak == done / 512);
        CHECK(accepted(img, kDataOld, kDataNew));
    }
    if (have_cryptsetup()) {
        TmpDir d;
        d.put("img", img);
        d.put("pw", std::vector<uint8_t>{'p', 'a', 's', 's'});
        REQUIRE(d.run(std::string("cryptsetup reencrypt ") + kCsFlags + " --resume-only --key-file pw img") == 0);
        std::vector<uint8_t> key;
        CHECK(same(plaintext(d.get("img"), &key), plain));
        CHECK(key == kDataNew);
    } else {
        WARN("cryptsetup not installed: the live resume is not checked");
    }
    // The rest of the data, then our own finish.
    rekey_range(img, done, data);
    MemoryStore s(0);
    s.data() = img;
    const luks2::Metadata md = metadata_of(img);
    Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(md);
    REQUIRE(st.ok());
    REQUIRE(st->has_value());
    REQUIRE(luks2::reencrypt_finish(registry(), s, md, **st).ok());
    const luks2::Metadata fin = metadata_of(s.data());
    CHECK(fin.config.requirements.empty());
    CHECK(fin.segments.size() == 1);
    CHECK(fin.keyslots.size() == 1);
    CHECK(fin.digests.size() == 1);
    CHECK(luks2::check_requirements(fin).ok());
    std::vector<uint8_t> key;
    CHECK(same(plaintext(s.data(), &key), plain));
    CHECK(key == kDataNew);
    if (have_cryptsetup()) {
        TmpDir d;
        d.put("img", s.data());
        d.put("pw", std::vector<uint8_t>{'p', 'a', 's', 's'});
        CHECK(d.run("cryptsetup open --test-passphrase --key-file pw img") == 0);
        CHECK(d.run("cryptsetup luksDump img | grep -q 'Requirements:'") != 0);
    }
}

TEST_CASE("luks2 reencrypt: on each mangled header our verdict is cryptsetup repair's", "[reencrypt]") {
    if (!have_cryptsetup()) {
        WARN("cryptsetup not installed: the mangled headers are not checked against it");
        return;
    }
    // 1 MiB of data: only the metadata matters here.
    std::vector<uint8_t> plain;
    const std::vector<uint8_t> img = image_with_plain(plain, 3u << 20, "none");
    TmpDir d;
    d.put("pw", std::vector<uint8_t>{'p', 'a', 's', 's'});
    for (const Mangle& m : mangles()) {
        INFO(m.what);
        const std::vector<uint8_t> bad = mangled(img, m.edit);
        const Verdict ours = our_verdict(bad, kDataOld, kDataNew);
        CHECK(ours == m.verdict);
        d.put("img", bad);
        // cryptsetup repair refuses what is invalid without writing, and
        // rewrites what needs repair (the mangle test's img_check_fail /
        // img_check_fail_repair_ok / img_check_ok).
        const bool repaired = d.run("cryptsetup repair -q --disable-locks --key-file pw img 2>/dev/null") == 0;
        CHECK(repaired == (ours != Verdict::Refused));
        if (!repaired) CHECK(same(d.get("img"), bad));
        // What it repaired we accept as it is then.
        if (repaired) CHECK(our_verdict(d.get("img"), kDataOld, kDataNew) == Verdict::Ok);
    }
}

namespace {

// A store with a given image whose n-th write fails (nothing of it lands)
// or, through TornStore, lands torn.
std::vector<uint8_t> image_with_plain(std::vector<uint8_t>& plain, uint64_t image_size, const char* resilience) {
    plain.resize(image_size - kDataOffset);
    for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<uint8_t>((i * 7919u) >> 9 ^ i);
    auto s = std::make_shared<MemoryStore>(0);
    s->data() = our_image(plain, image_size);
    luks2::ReencryptInitOptions o;
    o.resilience = resilience;
    o.keyslot.pbkdf = "pbkdf2";
    o.keyslot.iterations = 1000;
    o.new_key = kDataNew;
    REQUIRE(luks2::reencrypt_init(registry(), *s, text("pass"), o).ok());
    return s->data();
}

std::vector<uint8_t> plaintext_n(const std::vector<uint8_t>& image, std::size_t n, std::vector<uint8_t>* key) {
    auto s = std::make_shared<MemoryStore>(0);
    s->data() = image;
    Result<luks::Volume> v = luks2::open(registry(), *s, text("pass"));
    REQUIRE(v.ok());
    if (key) key->assign(v->table.key.data(), v->table.key.data() + v->table.key.size());
    Result<std::unique_ptr<dm::CryptTarget>> t = dm::CryptTarget::create(registry(), v->table, s);
    REQUIRE(t.ok());
    std::vector<uint8_t> buf(n);
    dm::Bio bio;
    bio.dir = dm::BioDir::Read;
    bio.vecs.push_back(SgEntry{buf.data(), buf.size()});
    REQUIRE((*t)->submit_sync(bio) == Status::Ok);
    return buf;
}

// Crashes a run of START at every fourth store write up to WRITES, torn
// each way in TEARS; resumes (and recovers) each crash and hands the
// resulting image to CHECK. A crash after the final header write leaves a
// finished header, which a resume refuses (only the wipe of the old
// keyslots was lost). Returns {resumed, recovered}.
std::pair<int, int> crash_sweep(const std::vector<uint8_t>& start, const luks2::ReencryptRunOptions& ro, int writes,
                                const std::vector<std::size_t>& tears,
                                const std::function<void(const std::vector<uint8_t>&)>& check) {
    int resumed = 0, recovered = 0;
    for (int at : testutil::crash_points(writes, 0, 4)) {
        for (std::size_t keep : tears) {
            INFO("crash at write " << at << " of " << writes << " keeping " << keep);
            testutil::TornStore torn(start, at, keep);
            CHECK_FALSE(luks2::reencrypt_run(registry(), torn, text("pass"), ro).ok());
            MemoryStore again(0);
            again.data() = torn.image();
            Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(metadata_of(again.data(), true));
            REQUIRE(st.ok());
            if (st->has_value()) {
                Result<luks2::ReencryptRunResult> rr = luks2::reencrypt_run(registry(), again, text("pass"), ro);
                REQUIRE(rr.ok());
                CHECK(rr->finished);
                ++resumed;
                recovered += rr->recovered;
            } else {
                CHECK(luks2::reencrypt_run(registry(), again, text("pass"), ro).status() == Status::Invalid);
            }
            check(again.data());
        }
    }
    return {resumed, recovered};
}

}  // namespace

TEST_CASE("luks2 reencrypt: the engine re-keys in steps, and resumes after a crash at any write", "[reencrypt]") {
    const uint64_t size = 6u << 20;  // 4 MiB of data
    for (const char* resilience : {"checksum", "journal"}) {
        INFO(resilience);
        std::vector<uint8_t> plain;
        const std::vector<uint8_t> start = image_with_plain(plain, size, resilience);
        luks2::ReencryptRunOptions ro;
        ro.hotzone_size = 512u << 10;
        testutil::TornStore clean(start, 0, 0);
        Result<luks2::ReencryptRunResult> r = luks2::reencrypt_run(registry(), clean, text("pass"), ro);
        REQUIRE(r.ok());
        CHECK(r->finished);
        CHECK(r->hotzone == (512u << 10));
        std::vector<uint8_t> key;
        CHECK(same(plaintext_n(clean.image(), plain.size(), &key), plain));
        CHECK(key == kDataNew);
        CHECK(metadata_of(clean.image()).config.requirements.empty());
        const int writes = clean.writes();
        CHECK(writes > 8 * 5);
        // Crash points spread over the run, each with several tears (whole
        // 4 KiB blocks for checksum: its recovery, as cryptsetup's, needs
        // block-atomic writes; any tear for journal).
        std::vector<std::size_t> tears = {0, 64};
        if (std::string(resilience) == "journal") tears = {1, testutil::TornStore::kHalfBytes};
        const auto [resumed, recovered] = crash_sweep(start, ro, writes, tears, [&](const std::vector<uint8_t>& image) {
            CHECK(same(plaintext_n(image, plain.size(), &key), plain));
            CHECK(key == kDataNew);
        });
        CHECK(recovered > 0);
        WARN(resilience << ": " << resumed << " crashes resumed, " << recovered << " of them recovering a hotzone");
    }
}

TEST_CASE("luks2 reencrypt: cryptsetup repairs and resumes our crash, and we resume cryptsetup killed mid-way", "[reencrypt]") {
    if (!have_cryptsetup()) {
        WARN("cryptsetup not installed: the crash interop is not checked");
        return;
    }
    const uint64_t size = 6u << 20;
    for (const char* resilience : {"checksum", "journal"}) {
        INFO(resilience);
        std::vector<uint8_t> plain;
        const std::vector<uint8_t> start = image_with_plain(plain, size, resilience);
        luks2::ReencryptRunOptions ro;
        ro.hotzone_size = 512u << 10;
        // Ours crashed in the middle of a hotzone's data write (the 4th
        // step's: protect, hot header x2, data): the header says
        // in-reencryption; cryptsetup needs repair, then resumes.
        testutil::TornStore torn(start, 6 * 3 + 4, 64);
        CHECK_FALSE(luks2::reencrypt_run(registry(), torn, text("pass"), ro).ok());
        Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(metadata_of(torn.image(), true));
        REQUIRE(st.ok());
        REQUIRE(st->has_value());
        CHECK((*st)->crashed);
        TmpDir d;
        d.put("pw", std::vector<uint8_t>{'p', 'a', 's', 's'});
        d.put("img", torn.image());
        CHECK(d.run(std::string("cryptsetup reencrypt ") + kCsFlags + " --resume-only --key-file pw img 2>/dev/null") != 0);
        REQUIRE(d.run("cryptsetup repair -q --disable-locks --key-file pw img") == 0);
        REQUIRE(d.run(std::string("cryptsetup reencrypt ") + kCsFlags + " --resume-only --key-file pw img") == 0);
        std::vector<uint8_t> key;
        CHECK(same(plaintext_n(d.get("img"), plain.size(), &key), plain));
        CHECK(key == kDataNew);

        // Theirs killed (SIGKILL) once its header's seqid has moved by
        // 4 and 60 (checksum) or 30 (journal): two header writes a 64 KiB step; we finish whatever
        // it left (mid-way or a crashed hotzone), the plaintext intact.
        int ours = 0, crashed = 0;
        const std::vector<int> kills =
            std::string(resilience) == "checksum" ? std::vector<int>{4, 60} : std::vector<int>{30};
        for (int steps : kills) {
            INFO("killed after seqid + " << steps);
            d.put("img", start);
            const uint64_t seq0 = metadata_of(start).hdr.seqid;
            // ("true;": $! must be cryptsetup's pid, not a subshell's.)
            (void)d.run(std::string("true; cryptsetup reencrypt ") + kCsFlags +
                        " --resume-only --hotzone-size 64K --key-file pw img >/dev/null 2>&1 & pid=$!; "
                        "while kill -0 $pid 2>/dev/null; do "
                        "s=$(od -An -j16 -N8 -tu8 --endian=big img | tr -d ' '); "
                        "[ \"$s\" -ge " + std::to_string(seq0 + steps) + " ] && kill -9 $pid && break; done; "
                        "wait $pid 2>/dev/null; true");
            MemoryStore s(0);
            s.data() = d.get("img");
            Result<std::optional<luks2::ReencryptState>> left = luks2::reencrypt_state(metadata_of(s.data(), true));
            REQUIRE(left.ok());
            if (left->has_value()) {
                crashed += (*left)->crashed;
                Result<luks2::ReencryptRunResult> rr = luks2::reencrypt_run(registry(), s, text("pass"), ro);
                REQUIRE(rr.ok());
                CHECK(rr->finished);
                CHECK(rr->recovered == (*left)->crashed);
                ++ours;
            }
            CHECK(same(plaintext_n(s.data(), plain.size(), &key), plain));
            CHECK(key == kDataNew);
        }
        CHECK(ours > 0);
        WARN(resilience << ": " << ours << " of " << kills.size() << " cryptsetup runs killed before the end (" << crashed
                        << " in a hotzone) and finished by us");
    }
}

TEST_CASE("luks2 reencrypt: a re-key to another cipher, key size and sector size, by us and by cryptsetup", "[reencrypt]") {
    std::vector<uint8_t> plain((4u << 20) - kDataOffset);
    for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<uint8_t>(i * 131u >> 5);
    std::vector<uint8_t> img;
    {
        auto s = std::make_shared<MemoryStore>(0);
        s->data() = our_image(plain, 4u << 20);
        luks2::ReencryptInitOptions o;
        o.resilience = "checksum";
        o.cipher = "aes-cbc-essiv:sha256";
        o.key_size = 32;
        o.sector_size = 512;
        o.keyslot.pbkdf = "pbkdf2";
        o.keyslot.iterations = 1000;
        Result<luks2::ReencryptState> st = luks2::reencrypt_init(registry(), *s, text("pass"), o);
        REQUIRE(st.ok());
        img = s->data();
    }
    const luks2::Metadata md = metadata_of(img);
    CHECK(md.segments.at(2).encryption == "aes-cbc-essiv:sha256");
    CHECK(md.segments.at(2).sector_size == 512);
    {
        MemoryStore s(0);
        s.data() = img;
        luks2::ReencryptRunOptions ro;
        ro.hotzone_size = 256u << 10;
        Result<luks2::ReencryptRunResult> r = luks2::reencrypt_run(registry(), s, text("pass"), ro);
        REQUIRE(r.ok());
        CHECK(r->finished);
        std::vector<uint8_t> key;
        CHECK(same(plaintext_n(s.data(), plain.size(), &key), plain));
        CHECK(key.size() == 32);
        CHECK(metadata_of(s.data()).segments.at(0).encryption == "aes-cbc-essiv:sha256");
    }
    if (have_cryptsetup()) {
        TmpDir d;
        d.put("pw", std::vector<uint8_t>{'p', 'a', 's', 's'});
        d.put("img", img);
        REQUIRE(d.run(std::string("cryptsetup reencrypt ") + kCsFlags + " --resume-only --key-file pw img") == 0);
        std::vector<uint8_t> key;
        CHECK(same(plaintext_n(d.get("img"), plain.size(), &key), plain));
        CHECK(d.run("cryptsetup luksDump img | grep -q 'cipher: aes-cbc-essiv:sha256'") == 0);
    }
}

TEST_CASE("luks2 reencrypt: init and finish crashed at any write leave the old or the new header", "[reencrypt]") {
    std::vector<uint8_t> img;
    {
        auto s = std::make_shared<MemoryStore>(4u << 20);
        luks2::FormatOptions fo;
        fo.pbkdf = "pbkdf2";
        fo.iterations = 1000;
        fo.keyslots_size = 1u << 20;
        fo.data_offset = kDataOffset;
        fo.volume_key = kDataOld;
        REQUIRE(luks2::format(registry(), *s, text("pass"), fo).ok());
        img = s->data();
    }
    luks2::ReencryptInitOptions o;
    o.keyslot.pbkdf = "pbkdf2";
    o.keyslot.iterations = 1000;
    o.new_key = kDataNew;
    testutil::TornStore clean(img, 0, 0);
    REQUIRE(luks2::reencrypt_init(registry(), clean, text("pass"), o).ok());
    const int n = clean.writes();
    CHECK(n == 3);  // the new keyslot's area, then the two header copies
    for (int at = 1; at <= n; ++at) {
        for (std::size_t keep : {std::size_t{0}, std::size_t{1}, testutil::TornStore::kHalfBytes}) {
            INFO("init crashed at write " << at << " keeping " << keep);
            testutil::TornStore torn(img, at, keep);
            CHECK_FALSE(luks2::reencrypt_init(registry(), torn, text("pass"), o).ok());
            const luks2::Metadata md = metadata_of(torn.image(), true);
            Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(md);
            REQUIRE(st.ok());
            if (st->has_value()) {
                CHECK(accepted(torn.image(), kDataOld, kDataNew));
            } else {
                std::vector<uint8_t> key;
                (void)plaintext_n(torn.image(), 4096, &key);
                CHECK(key == kDataOld);
            }
        }
    }
    // The finish: the cleaned header or the one in reencryption, never neither.
    const std::vector<uint8_t> inited = clean.image();
    Result<std::optional<luks2::ReencryptState>> st0 = luks2::reencrypt_state(metadata_of(inited));
    REQUIRE(st0.ok());
    REQUIRE(st0->has_value());
    for (int at = 1; at <= 2; ++at) {
        INFO("finish crashed at write " << at);
        testutil::TornStore torn(inited, at, testutil::TornStore::kHalfBytes);
        CHECK_FALSE(luks2::reencrypt_finish(registry(), torn, metadata_of(inited), **st0).ok());
        const luks2::Metadata md = metadata_of(torn.image(), true);
        Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(md);
        REQUIRE(st.ok());
        if (st->has_value()) CHECK(accepted(torn.image(), kDataOld, kDataNew));
        else CHECK(luks2::check_requirements(md).ok());
    }
}

namespace {

// The whole plaintext of a LUKS2 --integrity image as `cryptsetup open`
// stacks it (every tag checked), and the volume key that opened it.
std::vector<uint8_t> integrity_plain(const std::vector<uint8_t>& image, std::vector<uint8_t>* key) {
    auto s = std::make_shared<MemoryStore>(0);
    s->data() = image;
    Result<luks::Volume> v = luks2::open(registry(), *s, text("pass"));
    REQUIRE(v.ok());
    if (key) key->assign(v->table.key.data(), v->table.key.data() + v->table.key.size());
    auto d = luks::integrity_device(registry(), *v, s, {.read_only = true});
    REQUIRE(d.ok());
    std::vector<uint8_t> out(static_cast<std::size_t>((*d)->size()));
    REQUIRE(dm::read_sync(**d, 0, out) == Status::Ok);
    return out;
}

}  // namespace

TEST_CASE("luks2 reencrypt: an integrity profile is re-keyed, data and tags, and a crash at any write recovers",
          "[reencrypt][integrity]") {
    struct Case {
        const char* cipher;
        const char* integrity;
        std::size_t key_size;
    };
    for (const Case c : {Case{"aes-xts-plain64", "hmac(sha256)", 96}, Case{"aes-gcm-random", "aead", 32}}) {
        INFO(c.cipher << " / " << c.integrity);
        std::vector<uint8_t> old_key(c.key_size), new_key(c.key_size);
        for (std::size_t i = 0; i < c.key_size; ++i) {
            old_key[i] = static_cast<uint8_t>(i);
            new_key[i] = static_cast<uint8_t>(100 + i);
        }
        auto s = std::make_shared<MemoryStore>(4u << 20);
        luks2::FormatOptions fo;
        fo.cipher = c.cipher;
        fo.key_size = static_cast<uint32_t>(c.key_size);
        fo.integrity = c.integrity;
        fo.pbkdf = "pbkdf2";
        fo.iterations = 1000;
        fo.keyslots_size = 1u << 20;
        fo.data_offset = 2u << 20;
        fo.volume_key = old_key;
        Result<luks::Volume> v = luks2::format(registry(), *s, text("pass"), fo);
        REQUIRE(v.ok());
        REQUIRE(luks::format_integrity(registry(), *v, s).ok());
        std::vector<uint8_t> plain;
        {
            auto d = luks::integrity_device(registry(), *v, s, {.read_only = false, .mode = 'D'});
            REQUIRE(d.ok());
            plain.resize(static_cast<std::size_t>((*d)->size()));
            for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<uint8_t>((i * 7919u) >> 9 ^ i);
            REQUIRE(dm::write_sync(**d, 0, plain) == Status::Ok);
            REQUIRE((*d)->flush() == Status::Ok);
        }
        // The dm-integrity superblock and journal: kept byte for byte.
        Result<integrity::Geometry> g = luks::integrity_geometry(*v, *s);
        REQUIRE(g.ok());
        const auto meta_begin = static_cast<std::ptrdiff_t>(fo.data_offset);
        const auto meta_end = meta_begin + static_cast<std::ptrdiff_t>(g->initial_sectors * 512);
        const std::vector<uint8_t> meta(s->data().begin() + meta_begin, s->data().begin() + meta_end);
        auto meta_kept = [&](const std::vector<uint8_t>& img) {
            return std::equal(meta.begin(), meta.end(), img.begin() + meta_begin);
        };

        luks2::ReencryptInitOptions o;
        o.keyslot.pbkdf = "pbkdf2";
        o.keyslot.iterations = 1000;
        o.new_key = new_key;
        CHECK(luks2::reencrypt_init(registry(), *s, text("pass"), o).status() == Status::Unsupported);  // checksum
        o.resilience = "journal";
        REQUIRE(luks2::reencrypt_init(registry(), *s, text("pass"), o).ok());
        const std::vector<uint8_t> start = s->data();

        luks2::ReencryptRunOptions ro;
        ro.hotzone_size = 128u << 10;
        testutil::TornStore clean(start, 0, 0);
        Result<luks2::ReencryptRunResult> r = luks2::reencrypt_run(registry(), clean, text("pass"), ro);
        REQUIRE(r.ok());
        CHECK(r->finished);
        CHECK(r->data_size == plain.size());
        std::vector<uint8_t> key;
        CHECK(same(integrity_plain(clean.image(), &key), plain));
        CHECK(key == new_key);
        CHECK(meta_kept(clean.image()));
        const int writes = clean.writes();
        CHECK(writes > 8 * 5);
        // Crash points over the whole run (every fourth write), each torn after its first
        // sector and in half: data without its tag, a tag without its data,
        // half a journal copy, half a header.
        const auto [resumed, recovered] =
            crash_sweep(start, ro, writes, {1, testutil::TornStore::kHalfBytes}, [&](const std::vector<uint8_t>& image) {
                CHECK(same(integrity_plain(image, &key), plain));
                CHECK(key == new_key);
                CHECK(meta_kept(image));
            });
        CHECK(recovered > 0);
        WARN(c.cipher << ": " << writes << " writes, " << resumed << " crashes resumed, " << recovered
                      << " of them recovering a hotzone");
    }
}
