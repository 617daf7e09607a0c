// reencrypt --encrypt / --decrypt with a detached header (no data shift):
// the engine crashed at every write of the header store and of the data
// store (torn: nothing, or half the write, landed) and resumed gives back
// the plaintext, recovering a crashed hotzone from its checksums or its
// journal. The live comparison with cryptsetup is tests/cli/
// reencrypt_header_kill.sh.
#include "test_util.hpp"
#include "torn_store.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/luks/reencrypt_shift.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>
#include <stdlib.h>

using namespace blkcrypt;
using namespace blkcrypt::luks;
using testutil::registry;
using testutil::text;

namespace {

constexpr uint64_t kData = 4u << 20, kHot = 512u << 10, kHeader = 16u << 20;

// The data of a detached header's crypt segment, decrypted.
std::vector<uint8_t> decrypted(const std::vector<uint8_t>& header, const std::vector<uint8_t>& data) {
    MemoryStore h(0);
    h.data() = header;
    Result<luks::Volume> v = luks2::open(registry(), h, text("pass"));
    REQUIRE(v.ok());
    auto d = std::make_shared<MemoryStore>(0);
    d->data() = data;
    Result<std::unique_ptr<dm::CryptTarget>> t = dm::CryptTarget::create(registry(), v->table, d);
    REQUIRE(t.ok());
    std::vector<uint8_t> buf(data.size());
    dm::Bio bio;
    bio.dir = dm::BioDir::Read;
    bio.vecs.push_back(SgEntry{buf.data(), buf.size()});
    REQUIRE((*t)->submit_sync(bio) == Status::Ok);
    return buf;
}

struct Start {
    std::vector<uint8_t> header, data;
};

Start encrypt_start(const std::vector<uint8_t>& plain, const std::string& resilience) {
    luks2::EncryptDetachedOptions o;
    o.format.pbkdf = "pbkdf2";
    o.format.iterations = 1000;
    o.resilience = resilience;
    MemoryStore h(kHeader);
    REQUIRE(luks2::encrypt_detached_init(registry(), h, text("pass"), o).ok());
    return {h.data(), plain};
}

Start decrypt_start(const std::vector<uint8_t>& plain, const std::string& resilience) {
    Start s = encrypt_start(plain, "checksum");
    MemoryStore h(0), d(0);
    h.data() = s.header;
    d.data() = s.data;
    luks2::ReencryptRunOptions ro;
    ro.data = &d;
    Result<luks2::ReencryptRunResult> r = luks2::reencrypt_run(registry(), h, text("pass"), ro);
    REQUIRE(r.ok());
    REQUIRE(r->finished);
    luks2::DecryptDetachedOptions o;
    o.resilience = resilience;
    REQUIRE(luks2::decrypt_detached_init(registry(), h, text("pass"), o).ok());
    return {h.data(), d.data()};
}

// The plaintext is back: through the header for an encryption, as stored
// for a decryption.
void check_plain(bool encrypt, const std::vector<uint8_t>& header, const std::vector<uint8_t>& data,
                 const std::vector<uint8_t>& plain) {
    if (encrypt) {
        CHECK(decrypted(header, data) == plain);
        CHECK(data != plain);
    } else {
        CHECK(data == plain);
    }
}

bool live(const luks2::ReencryptState& st, int id) { return id != st.seg_previous && id != st.seg_final && id != st.seg_moved; }

// A backward decryption with every hotzone done and the finish not yet
// written: the live segments all linear, none in flight.
bool all_done_unfinished(const luks2::Metadata& md, const luks2::ReencryptState& st) {
    if (st.mode != "decrypt" || st.crashed) return false;
    for (const auto& [id, s] : md.segments)
        if (live(st, id) && s.type != "linear") return false;
    return true;
}

// The hotzone in flight is the data's first one (the last of a backward run).
bool hot_at_zero(const luks2::Metadata& md, const luks2::ReencryptState& st) {
    for (const auto& [id, s] : md.segments)
        if (live(st, id) && std::count(s.flags.begin(), s.flags.end(), "in-reencryption") && s.offset == 0) return true;
    return false;
}

}  // namespace

TEST_CASE("luks2 encrypt/decrypt with a detached header: crashed at any write of either store, resumed to the plaintext",
          "[reencrypt-header]") {
    std::mt19937 rng(25);
    const std::vector<uint8_t> plain = testutil::random_bytes(rng, kData);
    for (bool encrypt : {true, false}) {
        for (const std::string resilience : {"checksum", "journal"}) {
            INFO((encrypt ? "encrypt " : "decrypt ") << resilience);
            const Start start = encrypt ? encrypt_start(plain, resilience) : decrypt_start(plain, resilience);
            luks2::ReencryptRunOptions ro;
            ro.hotzone_size = kHot;
            // A clean run counts each store's writes.
            int header_writes = 0, data_writes = 0;
            {
                testutil::TornStore h(start.header, 0, 0), d(start.data, 0, 0);
                luks2::ReencryptRunOptions o = ro;
                o.data = &d;
                Result<luks2::ReencryptRunResult> r = luks2::reencrypt_run(registry(), h, text("pass"), o);
                REQUIRE(r.ok());
                REQUIRE(r->finished);
                check_plain(encrypt, h.image(), d.image(), plain);
                header_writes = h.writes();
                data_writes = d.writes();
            }
            REQUIRE(header_writes > 8);
            REQUIRE(data_writes >= 8);
            int resumed = 0, recovered = 0, last_hotzone = 0;
            for (bool in_header : {true, false}) {
                const int writes = in_header ? header_writes : data_writes;
                // Every write of the steps and the finish's header update;
                // of the finish's wipe of the old areas (64 KiB writes, the
                // header already final) every 50th.
                for (int at : testutil::crash_points(writes, 64, 50)) {
                    for (std::size_t keep : {std::size_t{0}, testutil::TornStore::kHalfBytes}) {
                        INFO((in_header ? "header" : "data") << " write " << at << " of " << writes << " keeping " << keep);
                        testutil::TornStore h(start.header, in_header ? at : 0, keep);
                        testutil::TornStore d(start.data, in_header ? 0 : at, keep);
                        luks2::ReencryptRunOptions o = ro;
                        o.data = &d;
                        CHECK_FALSE(luks2::reencrypt_run(registry(), h, text("pass"), o).ok());
                        MemoryStore h2(0), d2(0);
                        h2.data() = h.image();
                        d2.data() = d.image();
                        // The header left may be finished already (a crash
                        // in the final wipe of the old areas).
                        Result<luks2::Header> left = luks2::read_header(registry(), h2);
                        REQUIRE(left.ok());
                        Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(left->md);
                        REQUIRE(st.ok());
                        if (st->has_value() && !encrypt) {
                            // Never the map cryptsetup 2.6.1 restarts from
                            // the end (all done, not finished).
                            CHECK_FALSE(all_done_unfinished(left->md, **st));
                            if ((*st)->crashed && hot_at_zero(left->md, **st)) {
                                // Repair of the last hotzone finishes the
                                // decryption: nothing is left to run.
                                MemoryStore h3(0), d3(0);
                                h3.data() = h2.data();
                                d3.data() = d2.data();
                                luks2::ReencryptRunOptions o3;
                                o3.data = &d3;
                                o3.recover_only = true;
                                Result<luks2::ReencryptRunResult> r3 = luks2::reencrypt_run(registry(), h3, text("pass"), o3);
                                REQUIRE(r3.ok());
                                CHECK(r3->finished);
                                CHECK(d3.data() == plain);
                                Result<luks2::Header> fin = luks2::read_header(registry(), h3);
                                REQUIRE(fin.ok());
                                Result<std::optional<luks2::ReencryptState>> none = luks2::reencrypt_state(fin->md);
                                REQUIRE(none.ok());
                                CHECK_FALSE(none->has_value());
                                ++last_hotzone;
                            }
                        }
                        if (st->has_value()) {
                            luks2::ReencryptRunOptions o2;
                            o2.data = &d2;
                            Result<luks2::ReencryptRunResult> rr = luks2::reencrypt_run(registry(), h2, text("pass"), o2);
                            REQUIRE(rr.ok());
                            CHECK(rr->finished);
                            recovered += rr->recovered;
                            ++resumed;
                        }
                        check_plain(encrypt, h2.data(), d2.data(), plain);
                    }
                }
            }
            CHECK(recovered > 0);
            if (!encrypt) CHECK(last_hotzone > 0);
            WARN((encrypt ? "encrypt " : "decrypt ") << resilience << ": " << header_writes << " header and " << data_writes
                                                     << " data writes; " << resumed << " crashes resumed ("
                                                     << recovered << " recovering a hotzone)");
        }
    }
}


namespace {

bool have_cryptsetup() {
    static const bool have = std::system("cryptsetup --version >/dev/null 2>&1") == 0;
    return have;
}

struct TmpDir {
    std::string path;
    TmpDir() {
        char tmpl[] = "/tmp/blkcrypt-rheader-XXXXXX";
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        path = tmpl;
        put("pw", std::vector<uint8_t>{'p', 'a', 's', 's'});
    }
    ~TmpDir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
    void put(const std::string& name, const std::vector<uint8_t>& b) const {
        std::ofstream(path + "/" + name, std::ios::binary)
            .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    }
    std::vector<uint8_t> get(const std::string& name) const {
        std::vector<uint8_t> b;
        REQUIRE(testutil::read_file(path + "/" + name, &b));
        return b;
    }
    int run(const std::string& cmd) const { return std::system(("cd '" + path + "' && " + cmd + " >/dev/null 2>&1").c_str()); }
};

constexpr const char* kCs = "-q --disable-locks --key-file pw --header hdr";

}  // namespace

// Why the engine never writes the "all done, finish pending" map of a
// backward decryption, and why a kill in the last hotzone is finished by
// blkcrypt: cryptsetup 2.6.1 takes a backward map with one live segment for
// a fresh start (lib/luks2/luks2_reencrypt.c _offset_backward) and decrypts
// the plaintext again with the old key; its repair of a crash in the last
// hotzone writes exactly that map and stops. Both checked live.
TEST_CASE("luks2 decrypt with a detached header: the map cryptsetup 2.6.1 restarts, and what its repair of the last hotzone leaves",
          "[reencrypt-header]") {
    if (!have_cryptsetup()) {
        WARN("cryptsetup not installed: skipped");
        return;
    }
    std::mt19937 rng(27);
    const std::vector<uint8_t> plain = testutil::random_bytes(rng, kData);
    const Start start = decrypt_start(plain, "checksum");
    luks2::ReencryptRunOptions ro;
    ro.hotzone_size = kHot;
    // Our run crashed at its last data write: the hotzone at offset 0 in
    // flight (half of it written).
    int data_writes = 0;
    {
        testutil::TornStore h(start.header, 0, 0), d(start.data, 0, 0);
        luks2::ReencryptRunOptions o = ro;
        o.data = &d;
        REQUIRE(luks2::reencrypt_run(registry(), h, text("pass"), o).ok());
        data_writes = d.writes();
    }
    testutil::TornStore h(start.header, 0, 0), d(start.data, data_writes, testutil::TornStore::kHalfBytes);
    luks2::ReencryptRunOptions o = ro;
    o.data = &d;
    REQUIRE_FALSE(luks2::reencrypt_run(registry(), h, text("pass"), o).ok());
    {
        MemoryStore hs(0);
        hs.data() = h.image();
        Result<luks2::Header> left = luks2::read_header(registry(), hs);
        REQUIRE(left.ok());
        Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(left->md);
        REQUIRE(st.ok());
        REQUIRE(st->has_value());
        REQUIRE(hot_at_zero(left->md, **st));
    }
    TmpDir t;
    t.put("hdr", h.image());
    t.put("img", d.image());
    // cryptsetup's repair recovers the hotzone (the data is the plaintext)
    // and leaves the all-done map, not finished.
    REQUIRE(t.run(std::string("cryptsetup repair ") + kCs + " img") == 0);
    CHECK(t.get("img") == plain);
    const std::vector<uint8_t> repaired = t.get("hdr");
    MemoryStore rs(0);
    rs.data() = repaired;
    Result<luks2::Header> rep = luks2::read_header(registry(), rs);
    REQUIRE(rep.ok());
    Result<std::optional<luks2::ReencryptState>> rst = luks2::reencrypt_state(rep->md);
    REQUIRE(rst.ok());
    REQUIRE(rst->has_value());
    CHECK(all_done_unfinished(rep->md, **rst));
    // Its resume of that map is not the plaintext (2.6.1 restarts it).
    (void)t.run(std::string("cryptsetup reencrypt --resume-only --force-offline-reencrypt ") + kCs + " img");
    CHECK(t.get("img") != plain);
    // blkcrypt finishes the same map to the plaintext.
    MemoryStore hd(0), dd(0);
    hd.data() = repaired;
    dd.data() = plain;
    luks2::ReencryptRunOptions o2;
    o2.data = &dd;
    Result<luks2::ReencryptRunResult> r2 = luks2::reencrypt_run(registry(), hd, text("pass"), o2);
    REQUIRE(r2.ok());
    CHECK(r2->finished);
    CHECK(dd.data() == plain);
}

// cryptsetup's decrypt finish wipes an old keyslot's area before it drops
// the keyslot from the JSON: killed in between, the header still lists a
// keyslot that opens nothing, over data that is all plaintext. Such a
// header is finished without a key.
TEST_CASE("luks2 decrypt with a detached header: all done, the old keyslot's area wiped, finished without a key",
          "[reencrypt-header]") {
    std::mt19937 rng(28);
    const std::vector<uint8_t> plain = testutil::random_bytes(rng, kData);
    const Start start = decrypt_start(plain, "journal");
    MemoryStore h(0), d(0);
    h.data() = start.header;
    d.data() = plain;
    Result<luks2::Header> hd = luks2::read_header(registry(), h);
    REQUIRE(hd.ok());
    Result<std::optional<luks2::ReencryptState>> st = luks2::reencrypt_state(hd->md);
    REQUIRE(st.ok());
    REQUIRE(st->has_value());
    Result<std::string> done = luks2::reencrypt_backward_progress_json(hd->md, **st, kData, 0, 0);
    REQUIRE(done.ok());
    REQUIRE(luks2::write_metadata(registry(), h, hd->md, *done).ok());
    for (const auto& [id, ks] : hd->md.keyslots)
        if (ks.type == "luks2") std::fill_n(h.data().begin() + static_cast<std::ptrdiff_t>(ks.area_offset), ks.area_size, uint8_t{0});
    luks2::ReencryptRunOptions o;
    o.data = &d;
    Result<luks2::ReencryptRunResult> r = luks2::reencrypt_run(registry(), h, text("pass"), o);
    REQUIRE(r.ok());
    CHECK(r->finished);
    CHECK(d.data() == plain);
    Result<luks2::Header> fin = luks2::read_header(registry(), h);
    REQUIRE(fin.ok());
    Result<std::optional<luks2::ReencryptState>> none = luks2::reencrypt_state(fin->md);
    REQUIRE(none.ok());
    CHECK_FALSE(none->has_value());
    CHECK(fin->md.keyslots.empty());
}
