// The encrypted dm-integrity journal (journal_crypt:) against the kernel:
// tests/golden/integrity-jcrypt/ (record.sh) holds, for ctr(aes), chacha20
// and cbc(aes), the hash of the journal the kernel's format wrote and an
// image the kernel left with committed, encrypted journal sections, with
// the bytes its replay gave.
#include "paths.hpp"
#include "test_util.hpp"

#include <blkcrypt/integrity/device.hpp>
#include <blkcrypt/integrity/format.hpp>
#include <blkcrypt/integrity/geometry.hpp>
#include <blkcrypt/integrity/journal.hpp>
#include <blkcrypt/integrity/journal_crypt.hpp>
#include <blkcrypt/integrity/superblock.hpp>
#include <blkcrypt/shash.hpp>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

using namespace blkcrypt;
using namespace blkcrypt::integrity;

namespace {

const std::string kDir = std::string(testutil::kSourceDir) + "/tests/golden/integrity-jcrypt/";
const char* const kCases[] = {"ctr-aes", "chacha20", "cbc-aes"};
constexpr uint64_t kDisk = 4194304;

std::vector<uint8_t> unxz(const std::string& path) {
    std::vector<uint8_t> out;
    FILE* p = ::popen(("xz -dc '" + path + "'").c_str(), "r");
    REQUIRE(p);
    uint8_t buf[65536];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.insert(out.end(), buf, buf + n);
    REQUIRE(::pclose(p) == 0);
    return out;
}

std::map<std::string, std::string> info_of(const std::string& name) {
    std::ifstream f(kDir + name + ".info");
    REQUIRE(f);
    std::map<std::string, std::string> kv;
    std::string line;
    while (std::getline(f, line)) {
        if (line.empty() || line[0] == '#') continue;
        const auto eq = line.find('=');
        if (eq != std::string::npos && !kv.count(line.substr(0, eq))) kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return kv;
}

std::string sha256_hex(ConstBytes b) {
    auto h = Shash::alloc(testutil::registry(), "sha256");
    REQUIRE(h.ok());
    std::vector<uint8_t> d(32);
    REQUIRE(h->digest(b, d) == Status::Ok);
    return testutil::hex(d);
}

SecureBuffer key_of(const std::map<std::string, std::string>& info) {
    const std::string& k = info.at("key");
    return SecureBuffer(ConstBytes(reinterpret_cast<const uint8_t*>(k.data()), k.size()));
}

Geometry geometry_of(const Superblock& sb) {
    Devices dev;
    dev.data_sectors = kDisk / 512;
    auto g = open_geometry(sb, dev);
    REQUIRE(g.ok());
    return *g;
}

std::vector<uint8_t> seeded_block(int seed) {
    std::string s;
    char line[32];
    for (int n = 0; n < 256; ++n) {
        std::snprintf(line, sizeof line, "%03d-%04d-integr\n", seed, n);
        s += line;
    }
    return {s.begin(), s.end()};
}

}  // namespace

TEST_CASE("integrity jcrypt: integritysetup's cipher names in the kernel's form", "[integrity][journal]") {
    CHECK(journal_crypt_kernel_name("ctr-aes") == "ctr(aes)");
    CHECK(journal_crypt_kernel_name("cbc-aes") == "cbc(aes)");
    CHECK(journal_crypt_kernel_name("chacha20") == "chacha20");
    CHECK(journal_crypt_kernel_name("ctr(aes)") == "ctr(aes)");
    for (const char* name : kCases) {
        const auto info = info_of(name);
        const std::string table = info.at("table");
        CHECK(table.find("journal_crypt:" + journal_crypt_kernel_name(name) + ":") != std::string::npos);
    }
}

TEST_CASE("integrity jcrypt: the encrypted clean journal equals the kernel's", "[integrity][journal][golden]") {
    for (const char* name : kCases) {
        INFO(name);
        const auto info = info_of(name);
        REQUIRE(info.at("format_nowipe rc") == "0");
        const auto head = unxz(kDir + name + ".fmt.sb.xz");
        auto sb = decode_superblock(head);
        REQUIRE(sb.ok());
        const Geometry g = geometry_of(*sb);
        REQUIRE(g.journal_sections == 2);
        const SecureBuffer key = key_of(info);
        auto c = JournalCrypt::create(testutil::registry(), journal_crypt_kernel_name(name), key, g);
        REQUIRE(c.ok());
        CHECK((*c)->stream() == (std::string(name) != "cbc-aes"));

        auto raw = std::make_shared<MemoryStore>(kDisk);
        auto js = journal_crypt_store(raw, *c, g);
        REQUIRE(init_journal(*js, *sb, g).ok());
        const ConstBytes journal(raw->data().data() + journal_offset(g), journal_bytes(g));
        CHECK(sha256_hex(journal) == info.at("journal_sha256"));
        // Read back through the store: the plain clean journal.
        std::vector<uint8_t> plain(journal_bytes(g)), want(journal_bytes(g));
        REQUIRE(js->read(journal_offset(g), plain) == Status::Ok);
        MemoryStore clear(kDisk);
        REQUIRE(init_journal(clear, *sb, g).ok());
        std::memcpy(want.data(), clear.data().data() + journal_offset(g), want.size());
        CHECK(plain == want);
        CHECK(sha256_hex(want) != info.at("journal_sha256"));

        // format() with the same options writes the same journal.
        FormatOptions o;
        o.random_salt = false;
        o.params.salt = sb->salt;
        o.params.journal_sectors = 352;
        o.journal_crypt = journal_crypt_kernel_name(name);
        o.journal_crypt_key = key;
        o.compute_tags = false;
        MemoryStore img(kDisk);
        auto f = format(testutil::registry(), img, nullptr, o);
        REQUIRE(f.ok());
        REQUIRE(f->geometry.journal_sections == g.journal_sections);
        CHECK(sha256_hex(ConstBytes(img.data().data() + journal_offset(g), journal_bytes(g))) ==
              info.at("journal_sha256"));
        CHECK(std::equal(head.begin(), head.begin() + 512, img.data().begin()));
    }
}

TEST_CASE("integrity jcrypt: the kernel's crashed encrypted journals replay to the kernel's bytes",
          "[integrity][journal][golden]") {
    for (const char* name : kCases) {
        INFO(name);
        const auto info = info_of(name);
        REQUIRE(info.at("open J rc") == "0");
        const auto img = unxz(kDir + name + ".crashed.img.xz");
        REQUIRE(img.size() == kDisk);
        CHECK(sha256_hex(img) == info.at("raw_crashed"));
        OpenOptions o;
        o.internal_hash = "crc32c";
        o.journal_crypt = journal_crypt_kernel_name(name);
        o.journal_crypt_key = key_of(info);
        SECTION("writable: the replay writes what the kernel's wrote") {
            auto store = std::make_shared<MemoryStore>(img.size());
            store->data() = img;
            {
                auto t = IntegrityTarget::open(testutil::registry(), store, nullptr, o);
                REQUIRE(t.ok());
                CHECK(sha256_hex(store->data()) == info.at("raw_after_replay"));
                std::vector<uint8_t> all((*t)->size());
                REQUIRE((*t)->read_checked(0, all).ok());
                CHECK(sha256_hex(all) == info.at("mapping_after_replay"));
                std::istringstream ws(info.at("writes"));
                std::map<uint64_t, int> last;
                std::string w;
                while (ws >> w) last[std::stoull(w.substr(0, w.find(':')))] = std::stoi(w.substr(w.find(':') + 1));
                for (const auto& [seek, seed] : last) {
                    const auto want = seeded_block(seed);
                    CHECK(std::equal(want.begin(), want.end(), all.begin() + seek * 4096));
                }
            }
        }
        SECTION("read-only: the kernel's mapping, the image untouched") {
            o.read_only = true;
            auto store = std::make_shared<MemoryStore>(img.size());
            store->data() = img;
            auto t = IntegrityTarget::open(testutil::registry(), store, nullptr, o);
            REQUIRE(t.ok());
            std::vector<uint8_t> all((*t)->size());
            REQUIRE((*t)->read_checked(0, all).ok());
            CHECK(sha256_hex(all) == info.at("mapping_after_replay"));
            CHECK(sha256_hex(store->data()) == info.at("raw_crashed"));
        }
        SECTION("a wrong key or none: the journal's commit ids are refused, as the kernel fails the device") {
            auto store = std::make_shared<MemoryStore>(img.size());
            store->data() = img;
            o.journal_crypt_key[0] ^= 1;
            CHECK_FALSE(IntegrityTarget::open(testutil::registry(), store, nullptr, o).ok());
            o.journal_crypt.clear();
            CHECK_FALSE(IntegrityTarget::open(testutil::registry(), store, nullptr, o).ok());
            CHECK(sha256_hex(store->data()) == info.at("raw_crashed"));
        }
    }
}

TEST_CASE("integrity jcrypt: J-mode writes through an encrypted journal replay after a reopen", "[integrity][journal]") {
    const auto info = info_of("ctr-aes");
    const auto img = unxz(kDir + std::string("ctr-aes.crashed.img.xz"));
    OpenOptions o;
    o.internal_hash = "crc32c";
    o.journal_crypt = "ctr(aes)";
    o.journal_crypt_key = key_of(info);
    auto store = std::make_shared<MemoryStore>(img.size());
    store->data() = img;
    const auto blk = seeded_block(77);
    {
        auto t = IntegrityTarget::open(testutil::registry(), store, nullptr, o);
        REQUIRE(t.ok());
        REQUIRE((*t)->write_hashed(9 * 4096, blk).ok());
        REQUIRE((*t)->close().ok());
    }
    // The journal on disk stays encrypted: no plain clean section is there.
    auto sb = decode_superblock(store->data());
    REQUIRE(sb.ok());
    const Geometry g = geometry_of(*sb);
    MemoryStore clear(kDisk);
    REQUIRE(init_journal(clear, *sb, g).ok());
    CHECK(std::memcmp(clear.data().data() + journal_offset(g), store->data().data() + journal_offset(g), 512) != 0);
    auto t = IntegrityTarget::open(testutil::registry(), store, nullptr, o);
    REQUIRE(t.ok());
    std::vector<uint8_t> got(4096);
    REQUIRE((*t)->read_checked(9 * 4096, got).ok());
    CHECK(got == blk);
}

namespace {

// Images we write for the kernel to open (record-ours.sh): for each cipher,
// format with journal_crypt, J-mode writes of blocks 2 and 30, a flush, and
// the disk as it is then ("open": the journal committed, as a power-off
// would leave it) and after close ("closed").
struct Ours {
    std::string alg;  // integritysetup's name
    std::vector<uint8_t> open, closed, mapping;
};

constexpr const char* kOursKey = "0123456789abcdefFEDCBA9876543210";
const std::pair<uint64_t, int> kOursWrites[] = {{2, 51}, {30, 52}};

std::vector<Ours> ours_images() {
    std::vector<Ours> out;
    const ConstBytes key(reinterpret_cast<const uint8_t*>(kOursKey), 32);
    for (const char* alg : kCases) {
        Ours e;
        e.alg = alg;
        FormatOptions f;
        f.random_salt = false;
        f.params.salt.fill(0x33);
        f.params.journal_sectors = 352;
        f.journal_crypt = journal_crypt_kernel_name(alg);
        f.journal_crypt_key = key;
        auto store = std::make_shared<MemoryStore>(kDisk);
        auto fr = format(testutil::registry(), *store, nullptr, f);
        REQUIRE(fr.ok());
        OpenOptions o;
        o.internal_hash = "crc32c";
        o.journal_crypt = f.journal_crypt;
        o.journal_crypt_key = SecureBuffer(key);
        auto t = IntegrityTarget::open(testutil::registry(), store, nullptr, o);
        REQUIRE(t.ok());
        for (const auto& [blk, seed] : kOursWrites) REQUIRE((*t)->write_hashed(blk * 4096, seeded_block(seed)).ok());
        REQUIRE((*t)->flush().ok());
        e.open = store->data();
        REQUIRE((*t)->close().ok());
        e.closed = store->data();
        e.mapping.assign((*t)->size(), 0);
        for (const auto& [blk, seed] : kOursWrites) {
            const auto b = seeded_block(seed);
            std::copy(b.begin(), b.end(), e.mapping.begin() + blk * 4096);
        }
        out.push_back(std::move(e));
    }
    return out;
}

}  // namespace

// BLKCRYPT_EXPORT=DIR blkcrypt_tests "[.jcrypt-export]" (record-ours.sh).
TEST_CASE("integrity jcrypt: export images for the kernel", "[.jcrypt-export]") {
    const char* dir = std::getenv("BLKCRYPT_EXPORT");
    REQUIRE(dir);
    for (const auto& e : ours_images())
        for (const auto& [what, img] : {std::pair{"open", &e.open}, std::pair{"closed", &e.closed}}) {
            std::ofstream f(std::string(dir) + "/" + e.alg + "-ours-" + what + ".img", std::ios::binary);
            f.write(reinterpret_cast<const char*>(img->data()), std::streamsize(img->size()));
            REQUIRE(f.good());
        }
}

TEST_CASE("integrity jcrypt: the kernel opens and replays the encrypted journals we write",
          "[integrity][journal][golden]") {
    std::ifstream f(kDir + "ours.info");
    REQUIRE(f);
    std::map<std::string, std::string> kv;
    std::string line;
    while (std::getline(f, line)) {
        if (line.empty() || line[0] == '#') continue;
        const auto eq = line.find('=');
        if (eq != std::string::npos) kv[line.substr(0, eq)] += line.substr(eq + 1);
    }
    for (const auto& e : ours_images())
        for (const auto& [what, img] : {std::pair{"open", &e.open}, std::pair{"closed", &e.closed}}) {
            const std::string n = e.alg + "-ours-" + what + ".";
            INFO(n);
            // The image the kernel opened is the one our code writes today
            // (a change to the journal writer changes it: run record-ours.sh).
            CHECK(kv[n + "raw_before"] == sha256_hex(*img));
            CHECK(kv[n + "open rc"] == "0");
            CHECK(kv[n + "read rc"] == "0");
            CHECK(kv[n + "dmesg_error"].empty());
            CHECK(kv[n + "mapping"] == sha256_hex(e.mapping));
        }
}
