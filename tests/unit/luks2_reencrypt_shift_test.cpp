// In-place encryption with a data shift (reencrypt --encrypt
// --reduce-device-size) against cryptsetup 2.6.1, live when it is
// installed: our init's metadata is the one its --init-only writes; each
// segment map it leaves when killed is the one we write for that progress;
// we finish what it leaves (crashed or not), it repairs and finishes what
// we leave, and it opens and decrypts what we encrypt. Our own engine is
// crashed at every write (torn) and resumed. The plaintext is checked
// each time.
#include "test_util.hpp"
#include "tmp_dir.hpp"
#include "torn_store.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/luks/reencrypt_shift.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>
#include <stdlib.h>

using namespace blkcrypt;
using namespace blkcrypt::luks;
using testutil::registry;
using testutil::text;
using json = nlohmann::ordered_json;

namespace {

// 22 MiB image, --reduce-device-size 8M: the data moves by 4 MiB, 14 MiB
// of plaintext, hotzones [10,14) [6,10) [4,6) (cut at the moved segment)
// and [0,4) from the moved copy.
constexpr uint64_t kImage = 22u << 20, kReduce = 8u << 20, kShift = kReduce / 2, kPlain = kImage - kReduce;

bool same(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) { return a == b; }

std::vector<uint8_t> plain_image(uint32_t seed) {
    std::mt19937 rng(seed);
    return testutil::random_bytes(rng, kImage);
}

luks2::EncryptShiftOptions shift_options(uint32_t sector = 512) {
    luks2::EncryptShiftOptions o;
    o.reduce_size = kReduce;
    o.format.pbkdf = "pbkdf2";
    o.format.iterations = 1000;
    o.format.sector_size = sector;
    return o;
}

using testutil::have_cryptsetup;

const char* kCsFlags = "-q --disable-locks --force-offline-reencrypt --pbkdf pbkdf2 --pbkdf-force-iterations 1000";

// A temporary directory with the passphrase in pw.
struct TmpDir : testutil::TmpDir {
    TmpDir() : testutil::TmpDir("blkcrypt-rshift") { put("pw", std::vector<uint8_t>{'p', 'a', 's', 's'}); }
};

luks2::Metadata metadata_of(const std::vector<uint8_t>& image) {
    MemoryStore s(0);
    s.data() = image;
    Result<luks2::Header> h = luks2::read_header(registry(), s);
    REQUIRE(h.ok());
    return h->md;
}

// The first kPlain bytes of the LUKS2 device a passphrase opens.
std::vector<uint8_t> decrypted(const std::vector<uint8_t>& image, uint64_t n = kPlain) {
    auto s = std::make_shared<MemoryStore>(0);
    s->data() = image;
    Result<luks::Volume> v = luks2::open(registry(), *s, text("pass"));
    REQUIRE(v.ok());
    Result<std::unique_ptr<dm::CryptTarget>> t = dm::CryptTarget::create(registry(), v->table, s);
    REQUIRE(t.ok());
    std::vector<uint8_t> buf(n);
    dm::Bio bio;
    bio.dir = dm::BioDir::Read;
    bio.vecs.push_back(SgEntry{buf.data(), buf.size()});
    REQUIRE((*t)->submit_sync(bio) == Status::Ok);
    return buf;
}

std::vector<uint8_t> head(const std::vector<uint8_t>& v, uint64_t n) { return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n)}; }

// JSON with the random parts (salts, digests, uuid-free anyway) blanked.
json normalised(const std::string& text) {
    json j = json::parse(text);
    std::function<void(json&)> walk = [&](json& o) {
        if (!o.is_object() && !o.is_array()) return;
        for (auto& [k, v] : o.items()) {
            if (o.is_object() && (k == "salt" || k == "digest")) v = "";
            else walk(v);
        }
    };
    walk(j);
    return j;
}

// Where a segment map stands: the encrypted tail's start and the hotzone
// in flight (0 if none), read as the engine reads it.
std::pair<uint64_t, uint64_t> progress_of(const luks2::Metadata& md, const luks2::ReencryptState& st) {
    uint64_t from = kPlain, hot = 0;
    for (const auto& [id, s] : md.segments) {
        if (id == st.seg_previous || id == st.seg_final || id == st.seg_moved || s.type != "crypt") continue;
        const bool h = std::count(s.flags.begin(), s.flags.end(), "in-reencryption") > 0;
        if (h) hot = *s.size;
        else from = std::min<uint64_t>(from, s.iv_tweak * 512);
    }
    return {from, hot};
}

}  // namespace

TEST_CASE("luks2 encrypt shift: refused arguments write nothing", "[reencrypt-shift]") {
    const std::vector<uint8_t> plain = plain_image(1);
    for (uint64_t reduce : {uint64_t{0}, uint64_t{4096}, uint64_t{22u << 20}, uint64_t{24u << 20}}) {
        INFO(reduce);
        MemoryStore s(0);
        s.data() = plain;
        luks2::EncryptShiftOptions o = shift_options();
        o.reduce_size = reduce;
        CHECK(luks2::encrypt_shift_init(registry(), s, text("pass"), o).status() == Status::Invalid);
        CHECK(same(s.data(), plain));
    }
    // Already LUKS: refused.
    MemoryStore s(0);
    s.data() = plain;
    REQUIRE(luks2::encrypt_shift_init(registry(), s, text("pass"), shift_options()).ok());
    const std::vector<uint8_t> once = s.data();
    CHECK(luks2::encrypt_shift_init(registry(), s, text("pass"), shift_options()).status() == Status::Invalid);
    CHECK(same(s.data(), once));
}

TEST_CASE("luks2 encrypt shift: our init is cryptsetup's --init-only, and each finishes the other's", "[reencrypt-shift]") {
    if (!have_cryptsetup()) {
        WARN("cryptsetup not installed: the encryption interop is not checked");
        return;
    }
    const std::vector<uint8_t> plain = plain_image(2);
    TmpDir d;
    d.put("img", plain);
    REQUIRE(d.run(std::string("cryptsetup reencrypt --encrypt --reduce-device-size 8M --init-only ") + kCsFlags +
                  " --key-file pw img") == 0);
    const std::vector<uint8_t> theirs = d.get("img");

    MemoryStore ours(0);
    ours.data() = plain;
    Result<luks2::ReencryptState> st = luks2::encrypt_shift_init(registry(), ours, text("pass"), shift_options());
    REQUIRE(st.ok());
    CHECK(st->mode == "encrypt");
    CHECK(st->direction == "backward");
    CHECK(st->area_type == "datashift");
    CHECK(st->shift_size == kShift);
    // The metadata field for field (salts and digests aside), the data
    // past the header byte for byte (the moved copy included).
    const luks2::Metadata mo = metadata_of(ours.data()), mt = metadata_of(theirs);
    CHECK(normalised(mo.json).dump() == normalised(mt.json).dump());
    CHECK(mo.hdr.hdr_size == mt.hdr.hdr_size);
    CHECK(std::equal(ours.data().begin() + kShift, ours.data().end(), theirs.begin() + kShift));

    // cryptsetup finishes ours; it opens it, and its decryption gives the plaintext back.
    d.put("img", ours.data());
    REQUIRE(d.run(std::string("cryptsetup reencrypt --resume-only ") + kCsFlags + " --key-file pw img") == 0);
    CHECK(same(decrypted(d.get("img")), head(plain, kPlain)));
    // We finish theirs.
    MemoryStore t(0);
    t.data() = theirs;
    Result<luks2::ReencryptRunResult> r = luks2::reencrypt_run(registry(), t, text("pass"));
    REQUIRE(r.ok());
    CHECK(r->finished);
    CHECK(r->hotzone == kShift);
    CHECK(same(decrypted(t.data()), head(plain, kPlain)));
    CHECK(metadata_of(t.data()).config.requirements.empty());
    // The plaintext copy at the end is gone.
    CHECK_FALSE(std::equal(plain.begin(), plain.begin() + kShift, t.data().begin() + kShift + kPlain));
    d.put("ours", t.data());
    CHECK(d.run("cryptsetup open --test-passphrase --disable-locks --key-file pw ours") == 0);
    // Both finished headers are the same but for the random parts.
    CHECK(normalised(metadata_of(t.data()).json).dump() == normalised(metadata_of(d.get("img")).json).dump());
    // cryptsetup decrypts ours (data shifted back to 0, header exported).
    REQUIRE(d.run(std::string("cryptsetup reencrypt --decrypt --header ours.hdr ") + kCsFlags + " --key-file pw ours") == 0);
    CHECK(same(head(d.get("ours"), kPlain), head(plain, kPlain)));
}

TEST_CASE("luks2 encrypt shift: each map cryptsetup leaves when killed is ours for that progress, and we finish it", "[reencrypt-shift]") {
    if (!have_cryptsetup()) {
        WARN("cryptsetup not installed: the encryption interop is not checked");
        return;
    }
    const std::vector<uint8_t> plain = plain_image(3);
    TmpDir d;
    d.put("img", plain);
    REQUIRE(d.run(std::string("cryptsetup reencrypt --encrypt --reduce-device-size 8M --init-only ") + kCsFlags +
                  " --key-file pw img") == 0);
    const std::vector<uint8_t> start = d.get("img");
    const luks2::Metadata md0 = metadata_of(start);
    Result<std::optional<luks2::ReencryptState>> st0 = luks2::reencrypt_state(md0);
    REQUIRE(st0.ok());
    REQUIRE(st0->has_value());
    const uint64_t seq0 = md0.hdr.seqid;
    int maps = 0, crashed = 0;
    // Four steps, two header writes each, then the finish: kill after each.
    for (int steps = 1; steps <= 9; ++steps) {
        INFO("killed at seqid + " << steps);
        d.put("img", start);
        (void)d.run(std::string("true; cryptsetup reencrypt --resume-only ") + kCsFlags +
                    " --key-file pw img >/dev/null 2>&1 & pid=$!; "
                    "while kill -0 $pid 2>/dev/null; do "
                    "s=$(od -An -j16 -N8 -tu8 --endian=big img | tr -d ' '); "
                    "[ \"$s\" -ge " + std::to_string(seq0 + steps) + " ] && kill -9 $pid && break; done; "
                    "wait $pid 2>/dev/null; true");
        MemoryStore s(0);
        s.data() = d.get("img");
        const luks2::Metadata md = metadata_of(s.data());
        Result<std::optional<luks2::ReencryptState>> left = luks2::reencrypt_state(md);
        REQUIRE(left.ok());
        // Killed inside its first header write, the image keeps the init
        // map (compared in the test above).
        if (left->has_value() && md.hdr.seqid > seq0) {
            const auto [from, hot] = progress_of(md, **left);
            Result<std::string> mine = luks2::encrypt_shift_progress_json(md0, **st0, from, hot);
            REQUIRE(mine.ok());
            const json a = json::parse(*mine), b = json::parse(md.json);
            CHECK(a["segments"].dump() == b["segments"].dump());
            CHECK(a["digests"].dump() == b["digests"].dump());
            CHECK(a["keyslots"].dump() == b["keyslots"].dump());
            ++maps;
            crashed += (*left)->crashed;
            Result<luks2::ReencryptRunResult> r = luks2::reencrypt_run(registry(), s, text("pass"));
            REQUIRE(r.ok());
            CHECK(r->finished);
            CHECK(r->recovered == (*left)->crashed);
        } else if (left->has_value()) {
            REQUIRE(luks2::reencrypt_run(registry(), s, text("pass")).ok());
        }
        CHECK(same(decrypted(s.data()), head(plain, kPlain)));
    }
    CHECK(maps > 0);
    WARN(maps << " cryptsetup runs killed mid-way (" << crashed << " in a hotzone), each map ours, each finished by us");
}

TEST_CASE("luks2 encrypt shift: our engine crashed at any write resumes, by us and by cryptsetup", "[reencrypt-shift]") {
    const std::vector<uint8_t> plain = plain_image(4);
    for (uint32_t sector : {512u, 4096u}) {
        INFO("sector " << sector);
        MemoryStore init(0);
        init.data() = plain;
        REQUIRE(luks2::encrypt_shift_init(registry(), init, text("pass"), shift_options(sector)).ok());
        const std::vector<uint8_t> start = init.data();
        testutil::TornStore clean(start, 0, 0);
        Result<luks2::ReencryptRunResult> r = luks2::reencrypt_run(registry(), clean, text("pass"));
        REQUIRE(r.ok());
        REQUIRE(r->finished);
        CHECK(same(decrypted(clean.image()), head(plain, kPlain)));
        const int writes = clean.writes();
        int resumed = 0, recovered = 0, theirs = 0;
        // Both tears with 512-byte sectors; the 4096-byte pass (same
        // writes, other alignment) only crashes before a write lands.
        std::vector<std::size_t> tears = {0, testutil::TornStore::kHalfBytes};
        if (sector == 4096) tears = {0};
        for (int at : testutil::crash_points(writes)) {
            for (std::size_t keep : tears) {
                INFO("crash at write " << at << " of " << writes << " keeping " << keep);
                testutil::TornStore torn(start, at, keep);
                CHECK_FALSE(luks2::reencrypt_run(registry(), torn, text("pass")).ok());
                MemoryStore again(0);
                again.data() = torn.image();
                Result<luks2::Header> h = luks2::read_header(registry(), again);
                REQUIRE(h.ok());
                Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(h->md);
                REQUIRE(st.ok());
                if (!st->has_value()) {
                    CHECK(same(decrypted(again.data()), head(plain, kPlain)));
                    continue;
                }
                // Every 7th crash goes to cryptsetup (repair, then resume),
                // but for the one state 2.6.1 cannot resume, its own as
                // well: all data done, the moved copy not yet wiped
                // ("Failed to set device segments for next reencryption
                // hotzone."); we finish that one.
                const bool all_done = progress_of(h->md, **st) == std::pair<uint64_t, uint64_t>{0, 0};
                if (have_cryptsetup() && at % 7 == 0 && keep == 0 && !all_done) {
                    TmpDir d;
                    d.put("img", again.data());
                    REQUIRE(d.run("cryptsetup repair -q --disable-locks --key-file pw img") == 0);
                    REQUIRE(d.run(std::string("cryptsetup reencrypt --resume-only ") + kCsFlags + " --key-file pw img") == 0);
                    CHECK(same(decrypted(d.get("img")), head(plain, kPlain)));
                    ++theirs;
                    continue;
                }
                Result<luks2::ReencryptRunResult> rr = luks2::reencrypt_run(registry(), again, text("pass"));
                REQUIRE(rr.ok());
                CHECK(rr->finished);
                ++resumed;
                recovered += rr->recovered;
                CHECK(same(decrypted(again.data()), head(plain, kPlain)));
            }
        }
        CHECK(recovered > 0);
        WARN("sector " << sector << ": " << writes << " writes; " << resumed << " crashes resumed by us (" << recovered
                       << " recovering a hotzone), " << theirs << " by cryptsetup");
    }
}

TEST_CASE("luks2 encrypt shift: init crashed at any write leaves the plaintext, its head in the moved copy, or a header that resumes", "[reencrypt-shift]") {
    const std::vector<uint8_t> plain = plain_image(5);
    testutil::TornStore clean(plain, 0, 0);
    REQUIRE(luks2::encrypt_shift_init(registry(), clean, text("pass"), shift_options()).ok());
    const int writes = clean.writes();
    CHECK(writes >= 4);
    int untouched = 0, head_moved = 0, resumed = 0;
    for (int at : testutil::crash_points(writes)) {
        for (std::size_t keep : {std::size_t{0}, std::size_t{1}, testutil::TornStore::kHalfBytes}) {
            INFO("crash at write " << at << " of " << writes << " keeping " << keep);
            testutil::TornStore torn(plain, at, keep);
            CHECK_FALSE(luks2::encrypt_shift_init(registry(), torn, text("pass"), shift_options()).ok());
            MemoryStore s(0);
            s.data() = torn.image();
            Result<luks2::Header> h = luks2::read_header(registry(), s);
            // The secondary copy lands before the primary: a crash in the
            // last write leaves a header.
            if (at == writes) CHECK(h.ok());
            if (h && at == writes && keep == 0 && have_cryptsetup()) {
                // cryptsetup takes it too (the primary rebuilt from the secondary).
                TmpDir d;
                d.put("img", s.data());
                CHECK(d.run(std::string("cryptsetup reencrypt --resume-only ") + kCsFlags + " --key-file pw img") == 0);
                CHECK(same(decrypted(d.get("img")), head(plain, kPlain)));
            }
            if (h) {
                Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(h->md);
                REQUIRE(st.ok());
                REQUIRE(st->has_value());
                REQUIRE(luks2::reencrypt_run(registry(), s, text("pass")).ok());
                CHECK(same(decrypted(s.data()), head(plain, kPlain)));
                ++resumed;
            } else if (std::equal(plain.begin(), plain.begin() + kShift, s.data().begin())) {
                // Nothing over the head yet: the data before the moved copy is as it was.
                CHECK(std::equal(plain.begin(), plain.begin() + kImage - kShift, s.data().begin()));
                ++untouched;
            } else {
                // The head partly overwritten by keyslot areas: whole in the moved copy, the rest untouched.
                CHECK(std::equal(plain.begin(), plain.begin() + kShift, s.data().begin() + kImage - kShift));
                CHECK(std::equal(plain.begin() + kShift, plain.begin() + kImage - kShift, s.data().begin() + kShift));
                ++head_moved;
            }
        }
    }
    CHECK(resumed > 0);
    CHECK(head_moved > 0);
    WARN(writes << " init writes: " << untouched << " crashes left the plaintext untouched, " << head_moved
                << " its head in the moved copy, " << resumed << " a header that resumed");
}

TEST_CASE("luks2 encrypt shift: a plaintext shorter than the shift moves whole, as cryptsetup moves it", "[reencrypt-shift]") {
    // 10 MiB, --reduce-device-size 8M: 2 MiB of plaintext, a 4 MiB shift;
    // the moved segment is the 2 MiB at 6 MiB.
    std::mt19937 rng(6);
    const std::vector<uint8_t> plain = testutil::random_bytes(rng, 10u << 20);
    const uint64_t n = 2u << 20;
    MemoryStore ours(0);
    ours.data() = plain;
    Result<luks2::ReencryptState> st = luks2::encrypt_shift_init(registry(), ours, text("pass"), shift_options());
    REQUIRE(st.ok());
    const luks2::Metadata md = metadata_of(ours.data());
    CHECK(md.segments.at(st->seg_moved).offset == (6u << 20));
    CHECK(md.segments.at(st->seg_moved).size == n);
    const std::vector<uint8_t> start = ours.data();
    REQUIRE(luks2::reencrypt_run(registry(), ours, text("pass")).ok());
    CHECK(same(decrypted(ours.data(), n), head(plain, n)));
    if (!have_cryptsetup()) return;
    TmpDir d;
    d.put("img", plain);
    REQUIRE(d.run(std::string("cryptsetup reencrypt --encrypt --reduce-device-size 8M --init-only ") + kCsFlags +
                  " --key-file pw img") == 0);
    const std::vector<uint8_t> theirs = d.get("img");
    CHECK(normalised(md.json).dump() == normalised(metadata_of(theirs).json).dump());
    MemoryStore t(0);
    t.data() = theirs;
    REQUIRE(luks2::reencrypt_run(registry(), t, text("pass")).ok());
    CHECK(same(decrypted(t.data(), n), head(plain, n)));
    d.put("img", start);
    REQUIRE(d.run(std::string("cryptsetup reencrypt --resume-only ") + kCsFlags + " --key-file pw img") == 0);
    CHECK(same(decrypted(d.get("img"), n), head(plain, n)));
}
