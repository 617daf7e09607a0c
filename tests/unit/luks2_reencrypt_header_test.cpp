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

#include <memory>
#include <random>
#include <string>
#include <vector>

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
            int resumed = 0, recovered = 0;
            for (bool in_header : {true, false}) {
                const int writes = in_header ? header_writes : data_writes;
                // Every write of the steps and the finish's header update;
                // of the finish's wipe of the old areas (64 KiB writes, the
                // header already final) every 50th.
                for (int at = 1; at <= writes; at += at < 64 ? 1 : 50) {
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
            WARN((encrypt ? "encrypt " : "decrypt ") << resilience << ": " << header_writes << " header and " << data_writes
                                                     << " data writes; " << resumed << " crashes resumed ("
                                                     << recovered << " recovering a hotzone)");
        }
    }
}
