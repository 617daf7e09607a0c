// reencrypt --decrypt --header NEW of an in-device header (the data shifted
// back, online-reencrypt-v3): the init and the engine crashed at every
// write of either store (NEW or the image; nothing, or half the write,
// landed) leave a state that gives back the plaintext at offset 0: before
// NEW holds the metadata, the image's header or NEW's plain copy still
// describes the untouched ciphertext; after, a resume (recovering a crashed
// hotzone by re-reading its source, or the moved segment from its
// checksums or journal). Never the map cryptsetup 2.6.1 would run again
// (one linear segment, not finished); a repair of the last hotzone
// finishes. The live comparison with cryptsetup is
// tests/cli/reencrypt_decrypt_shift.sh.
#include "test_util.hpp"
#include "tmp_dir.hpp"
#include "torn_store.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/luks/reencrypt_shift.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace blkcrypt;
using namespace blkcrypt::luks;
using testutil::registry;
using testutil::text;

namespace {

constexpr uint64_t kShift = 1u << 20;

struct Image {
    std::vector<uint8_t> bytes, plain;  // the LUKS2 image; its data's plaintext
    uint64_t export_size = 0;
};

// A LUKS2 image with its data at kShift, `data` bytes of random plaintext
// encrypted into it.
Image make_image(uint64_t data, uint32_t seed) {
    std::mt19937 rng(seed);
    Image im;
    im.plain = testutil::random_bytes(rng, data);
    auto s = std::make_shared<MemoryStore>(kShift + data);
    luks2::FormatOptions fo;
    fo.pbkdf = "pbkdf2";
    fo.iterations = 1000;
    fo.sector_size = 512;
    fo.data_offset = kShift;
    Result<luks::Volume> v = luks2::format(registry(), *s, text("pass"), fo);
    REQUIRE(v.ok());
    Result<std::unique_ptr<dm::CryptTarget>> t = dm::CryptTarget::create(registry(), v->table, s);
    REQUIRE(t.ok());
    std::vector<uint8_t> buf = im.plain;
    dm::Bio bio;
    bio.dir = dm::BioDir::Write;
    bio.vecs.push_back(SgEntry{buf.data(), buf.size()});
    REQUIRE((*t)->submit_sync(bio) == Status::Ok);
    t->reset();
    im.bytes = s->data();
    Result<luks2::Header> h = luks2::read_header(registry(), *s);
    REQUIRE(h.ok());
    im.export_size = h->md.hdr_and_areas_size();
    return im;
}

std::optional<luks2::ReencryptState> state_of(const std::vector<uint8_t>& header, luks2::Metadata* md = nullptr) {
    MemoryStore h(0);
    h.data() = header;
    Result<luks2::Header> hd = luks2::read_header(registry(), h);
    if (!hd) return std::nullopt;
    if (md) *md = hd->md;
    Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(hd->md);
    REQUIRE(st.ok());
    return *st;
}

bool live(const luks2::ReencryptState& st, int id) { return id != st.seg_previous && id != st.seg_final && id != st.seg_moved; }

// The map cryptsetup 2.6.1 would take for the moved step still to run.
bool single_linear(const luks2::Metadata& md, const luks2::ReencryptState& st) {
    int n = 0;
    for (const auto& [id, s] : md.segments)
        if (live(st, id)) {
            if (s.type != "linear" || s.offset != 0 || !s.flags.empty()) return false;
            ++n;
        }
    return n == 1;
}

bool moved_hot(const luks2::Metadata& md, const luks2::ReencryptState& st) {
    for (const auto& [id, s] : md.segments)
        if (live(st, id) && std::count(s.flags.begin(), s.flags.end(), "in-reencryption") && s.offset == 0) return true;
    return false;
}

std::vector<uint8_t> head(const std::vector<uint8_t>& v, uint64_t n) { return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n)}; }

Result<luks2::ReencryptRunResult> run(std::vector<uint8_t>& header, std::vector<uint8_t>& image, bool recover_only = false) {
    MemoryStore h(0), d(0);
    h.data() = header;
    d.data() = image;
    luks2::ReencryptRunOptions o;
    o.data = &d;
    o.recover_only = recover_only;
    Result<luks2::ReencryptRunResult> r = luks2::reencrypt_run(registry(), h, text("pass"), o);
    header = h.data();
    image = d.data();
    return r;
}

}  // namespace

TEST_CASE("luks2 decrypt shift: refused arguments write nothing", "[reencrypt-decrypt-shift]") {
    const Image im = make_image(2u << 20, 1);
    for (const auto& [resilience, pass] : {std::pair{"none", "pass"}, {"datashift", "pass"}, {"journal", "pass"},
                                           {"checksum", "wrong"}}) {
        INFO(resilience << " " << pass);
        MemoryStore img(0), hdr(im.export_size);
        img.data() = im.bytes;
        luks2::DecryptShiftOptions o;
        o.resilience = resilience;
        CHECK_FALSE(luks2::decrypt_shift_init(registry(), img, hdr, text(pass), o).ok());
        CHECK(img.data() == im.bytes);
        CHECK(std::all_of(hdr.data().begin(), hdr.data().end(), [](uint8_t b) { return b == 0; }));
    }
}

TEST_CASE("luks2 decrypt shift: init and engine crashed at any write of either store give back the plaintext",
          "[reencrypt-decrypt-shift]") {
    // checksum: 5 MiB of data, hotzones [1,2) .. [4,5) MiB then the moved
    // [0,1) under checksums; journal (only where the moved segment fits
    // the area): 512 KiB, the moved step alone.
    for (const auto& [resilience, data] : {std::pair{"checksum", uint64_t{5} << 20}, {"journal", uint64_t{512} << 10}}) {
        INFO(resilience);
        const Image im = make_image(data, 7);
        luks2::DecryptShiftOptions o;
        o.resilience = resilience;
        // A clean init and run, counting each store's writes.
        std::vector<uint8_t> start_header, start_image;
        int init_writes[2] = {0, 0}, run_writes[2] = {0, 0};
        {
            testutil::TornStore img(im.bytes, 0, 0), hdr(std::vector<uint8_t>(im.export_size), 0, 0);
            REQUIRE(luks2::decrypt_shift_init(registry(), img, hdr, text("pass"), o).ok());
            init_writes[0] = hdr.writes();
            init_writes[1] = img.writes();
            start_header = hdr.image();
            start_image = img.image();
            luks2::Metadata md;
            std::optional<luks2::ReencryptState> st = state_of(start_header, &md);
            REQUIRE(st);
            CHECK(st->version == 3);
            CHECK(st->area_type == std::string("datashift-") + resilience);
            CHECK(st->direction == "forward");
            CHECK(st->shift_size == kShift);
            testutil::TornStore h2(start_header, 0, 0), d2(start_image, 0, 0);
            luks2::ReencryptRunOptions ro;
            ro.data = &d2;
            Result<luks2::ReencryptRunResult> r = luks2::reencrypt_run(registry(), h2, text("pass"), ro);
            REQUIRE(r.ok());
            REQUIRE(r->finished);
            CHECK(head(d2.image(), data) == im.plain);
            CHECK(d2.image().size() == im.bytes.size());
            CHECK_FALSE(state_of(h2.image()));
            run_writes[0] = h2.writes();
            run_writes[1] = d2.writes();
        }
        int before = 0, resumed = 0, recovered = 0, last = 0;
        // The init: a crash before NEW holds the metadata leaves the image's
        // header whole (nothing moved yet) or NEW's plain copy over the
        // untouched ciphertext at kShift.
        for (bool in_header : {true, false})
            for (int at : testutil::crash_points(init_writes[in_header ? 0 : 1]))
                for (std::size_t keep : {std::size_t{0}, testutil::TornStore::kHalfBytes}) {
                    INFO("init, " << (in_header ? "NEW" : "image") << " write " << at << " keeping " << keep);
                    testutil::TornStore img(im.bytes, in_header ? 0 : at, keep);
                    testutil::TornStore hdr(std::vector<uint8_t>(im.export_size), in_header ? at : 0, keep);
                    CHECK_FALSE(luks2::decrypt_shift_init(registry(), img, hdr, text("pass"), o).ok());
                    std::vector<uint8_t> h = hdr.image(), d = img.image();
                    if (state_of(h)) {
                        REQUIRE(run(h, d).ok());
                        CHECK(head(d, data) == im.plain);
                        ++resumed;
                        continue;
                    }
                    ++before;
                    // The ciphertext past the header is untouched; the
                    // header is the image's own or, the head moved over
                    // it, NEW's copy.
                    CHECK(std::equal(d.begin() + kShift, d.end(), im.bytes.begin() + kShift));
                    MemoryStore own(0);
                    own.data() = d;
                    if (!luks2::read_header(registry(), own).ok()) {
                        MemoryStore copy(0);
                        copy.data() = h;
                        Result<luks2::Header> c = luks2::read_header(registry(), copy);
                        REQUIRE(c.ok());
                        CHECK(c->md.segments.at(0).offset == kShift);
                    }
                }
        // The run.
        for (bool in_header : {true, false})
            for (int at : testutil::crash_points(run_writes[in_header ? 0 : 1]))
                for (std::size_t keep : {std::size_t{0}, testutil::TornStore::kHalfBytes}) {
                    INFO("run, " << (in_header ? "NEW" : "image") << " write " << at << " keeping " << keep);
                    testutil::TornStore h(start_header, in_header ? at : 0, keep), d(start_image, in_header ? 0 : at, keep);
                    luks2::ReencryptRunOptions ro;
                    ro.data = &d;
                    CHECK_FALSE(luks2::reencrypt_run(registry(), h, text("pass"), ro).ok());
                    std::vector<uint8_t> h2 = h.image(), d2 = d.image();
                    luks2::Metadata md;
                    std::optional<luks2::ReencryptState> st = state_of(h2, &md);
                    if (st) {
                        CHECK_FALSE(single_linear(md, *st));
                        if (st->crashed && moved_hot(md, *st)) {
                            std::vector<uint8_t> h3 = h2, d3 = d2;
                            Result<luks2::ReencryptRunResult> r3 = run(h3, d3, true);
                            REQUIRE(r3.ok());
                            CHECK(r3->finished);
                            CHECK(head(d3, data) == im.plain);
                            CHECK_FALSE(state_of(h3));
                            ++last;
                        }
                        Result<luks2::ReencryptRunResult> rr = run(h2, d2);
                        REQUIRE(rr.ok());
                        CHECK(rr->finished);
                        recovered += rr->recovered;
                        ++resumed;
                    }
                    CHECK(head(d2, data) == im.plain);
                }
        CHECK(recovered > 0);
        CHECK(last > 0);
        WARN(resilience << ": init " << init_writes[0] << "+" << init_writes[1] << " writes, run " << run_writes[0] << "+"
                        << run_writes[1] << "; " << before << " init crashes before the metadata, " << resumed
                        << " resumed (" << recovered << " recovering a hotzone, " << last
                        << " in the moved one, finished by repair)");
    }
}

TEST_CASE("luks2 decrypt shift: the map cryptsetup 2.6.1 leaves after its last step is finished without a key",
          "[reencrypt-decrypt-shift]") {
    const Image im = make_image(3u << 20, 9);
    MemoryStore img(0), hdr(im.export_size);
    img.data() = im.bytes;
    REQUIRE(luks2::decrypt_shift_init(registry(), img, hdr, text("pass"), {}).ok());
    std::vector<uint8_t> h = hdr.data(), d = img.data();
    REQUIRE(run(h, d).ok());
    const std::vector<uint8_t> plain_image = d;
    // That map written over the initial header by hand: one linear segment,
    // the requirement and the backups; the data already plaintext.
    MemoryStore h2(0);
    h2.data() = hdr.data();
    Result<luks2::Header> cur = luks2::read_header(registry(), h2);
    REQUIRE(cur.ok());
    std::optional<luks2::ReencryptState> st = state_of(h2.data());
    REQUIRE(st);
    Result<std::string> text_map = luks2::decrypt_shift_progress_json(cur->md, *st, 3u << 20, 3u << 20, 0, true);
    REQUIRE(text_map.ok());
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(*text_map);
    nlohmann::ordered_json segs = nlohmann::ordered_json::object();
    segs["0"] = {{"type", "linear"}, {"offset", "0"}, {"size", "dynamic"}};
    int k = 1;
    for (auto& [id, s] : j["segments"].items())
        if (s.contains("flags") && s["flags"][0].get<std::string>().rfind("backup-", 0) == 0) segs[std::to_string(k++)] = s;
    j["segments"] = segs;
    j["digests"][std::to_string(st->digest_old)]["segments"] = nlohmann::ordered_json::array({"1", "3"});
    REQUIRE(luks2::write_metadata(registry(), h2, cur->md, j.dump()).ok());
    luks2::Metadata md;
    st = state_of(h2.data(), &md);
    REQUIRE(st);
    REQUIRE(single_linear(md, *st));
    std::vector<uint8_t> h3 = h2.data(), d3 = plain_image;
    MemoryStore hs(0), ds(0);
    hs.data() = h3;
    ds.data() = d3;
    luks2::ReencryptRunOptions o;
    o.data = &ds;
    Result<luks2::ReencryptRunResult> r = luks2::reencrypt_run(registry(), hs, text("not the passphrase"), o);
    REQUIRE(r.ok());
    CHECK(r->finished);
    CHECK(head(ds.data(), 3u << 20) == im.plain);
    CHECK_FALSE(state_of(hs.data()));
}

TEST_CASE("luks2 decrypt shift: each map cryptsetup leaves when killed is ours for that progress, and we finish it",
          "[reencrypt-decrypt-shift]") {
    if (!testutil::have_cryptsetup()) {
        WARN("cryptsetup not installed: the decryption interop is not checked");
        return;
    }
    constexpr uint64_t kData = 5u << 20;  // four shifted hotzones, then the moved one
    const Image im = make_image(kData, 11);
    testutil::TmpDir d("blkcrypt-rdecs");
    d.put("pw", std::vector<uint8_t>{'p', 'a', 's', 's'});
    d.put("img", im.bytes);
    const std::string flags = " -q --disable-locks --force-offline-reencrypt --key-file pw";
    REQUIRE(d.run("cryptsetup reencrypt --decrypt --header hdr --init-only" + flags + " img") == 0);
    const std::vector<uint8_t> start_header = d.get("hdr"), start_image = d.get("img");
    luks2::Metadata md0;
    const std::optional<luks2::ReencryptState> st0 = state_of(start_header, &md0);
    REQUIRE(st0);
    const uint64_t seq0 = md0.hdr.seqid;
    int maps = 0, crashed = 0, theirs_last = 0;
    // Its resume writes the verification digest again (+1), then two maps
    // per shifted step (+2..+9), the moved step's (+10) and the map after it (+11).
    for (int steps = 2; steps <= 11; ++steps) {
        INFO("killed at seqid + " << steps);
        d.put("hdr", start_header);
        d.put("img", start_image);
        (void)d.run("true; cryptsetup reencrypt --decrypt --header hdr --resume-only" + flags +
                    " img >/dev/null 2>&1 & pid=$!; "
                    "while kill -0 $pid 2>/dev/null; do "
                    "s=$(od -An -j16 -N8 -tu8 --endian=big hdr | tr -d ' '); "
                    "[ \"$s\" -ge " + std::to_string(seq0 + steps) + " ] && kill -9 $pid && break; done; "
                    "wait $pid 2>/dev/null; true");
        std::vector<uint8_t> h = d.get("hdr"), img = d.get("img");
        luks2::Metadata md;
        const std::optional<luks2::ReencryptState> st = state_of(h, &md);
        if (!st) {  // killed after its finish
            CHECK(head(img, kData) == im.plain);
            continue;
        }
        // The progress the map says, read as the engine reads it.
        uint64_t done = kShift, hot_at = 0, hot_len = 0;
        for (const auto& [id, s] : md.segments) {
            if (!live(*st, id)) continue;
            if (std::count(s.flags.begin(), s.flags.end(), "in-reencryption")) {
                hot_at = s.offset;
                hot_len = *s.size;
            } else if (s.type == "linear" && s.offset == kShift) {
                done = s.size ? kShift + *s.size : kData;
            }
        }
        if (single_linear(md, *st)) {
            ++theirs_last;  // the map we never write (cryptsetup's after its last step)
        } else if (done > kShift || hot_len) {
            // (Its resume's first write re-creates the verification digest
            // over the init map, which we never rewrite: not compared.)
            const bool moved_step = hot_len && hot_at == 0;
            Result<std::string> mine = luks2::decrypt_shift_progress_json(
                md0, *st0, kData, moved_step ? kData : hot_len ? hot_at : done, moved_step ? 0 : hot_len, moved_step);
            REQUIRE(mine.ok());
            const nlohmann::ordered_json a = nlohmann::ordered_json::parse(*mine), b = nlohmann::ordered_json::parse(md.json);
            CHECK(a["segments"].dump() == b["segments"].dump());
            const std::string old_digest = std::to_string(st->digest_old);
            CHECK(a["digests"][old_digest].dump() == b["digests"][old_digest].dump());
            CHECK(a["keyslots"].dump() == b["keyslots"].dump());
            ++maps;
            crashed += st->crashed;
        }
        Result<luks2::ReencryptRunResult> r = run(h, img);
        REQUIRE(r.ok());
        CHECK(r->finished);
        CHECK(head(img, kData) == im.plain);
    }
    // Most of the ten kills land mid-way; on a loaded machine the polling
    // loop sees a step late more often and the run has finished by then.
    CHECK(maps >= 5);
    WARN(maps << " cryptsetup runs killed mid-way (" << crashed << " in a hotzone), each map ours; " << theirs_last
              << " in its map after the last step; each finished by us");
}
