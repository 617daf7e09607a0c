// The dm-crypt engine (CryptTarget) on a MemoryStore: the kernel's golden
// images written and read through bios of every shape, random bio sizes and
// segmentations against the single-bio result, sync against cryptd,
// concurrent submitters, refusals and I/O errors.
#include "dmcrypt_golden.hpp"
#include "test_util.hpp"
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/registry.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace blkcrypt;
using namespace blkcrypt::dm;

namespace {

using testutil::read_file;
using testutil::registry;
using testutil::hex;

using Buf = std::vector<uint8_t>;

using testutil::random_bytes;

// "<cipher> <key> <iv_offset> [<n> sector_size:N opts...]"
CryptTable table(const std::string& cipher, const std::string& key_hex, uint64_t iv_offset,
                 std::size_t sector_size, const std::string& opts = "") {
    std::vector<std::string> o;
    if (sector_size != 512) o.push_back("sector_size:" + std::to_string(sector_size));
    std::istringstream in(opts);
    for (std::string w; in >> w;) o.push_back(w);
    std::string args = cipher + " " + key_hex + " " + std::to_string(iv_offset);
    if (!o.empty()) {
        args += " " + std::to_string(o.size());
        for (const auto& w : o) args += " " + w;
    }
    auto t = parse_crypt_args(args);
    INFO(cipher << ": " << (t ? "" : t.error().message));
    REQUIRE(t);
    return std::move(t).value();
}

std::unique_ptr<CryptTarget> target(const CryptTable& t, std::shared_ptr<BackingStore> store,
                                    CryptTargetOptions opts = {}) {
    if (!opts.threads) opts.threads = 2;
    if (!opts.queue_depth) opts.queue_depth = 8;
    auto tg = CryptTarget::create(registry(), t, std::move(store), 0, opts);
    INFO(t.cipher << ": " << (tg ? "" : tg.error().message));
    REQUIRE(tg);
    return std::move(tg).value();
}

// Bios over [0, mem.size()) of a target: either one bio, or random sizes
// (whole sectors) each cut into random segments, odd sizes and splits inside
// sectors included. Everything is submitted before waiting, so bios run
// concurrently; they never overlap.
struct BioSet {
    std::deque<Bio> bios;  // stable addresses while in flight
    std::deque<std::vector<SgEntry>> segs;
    std::vector<std::atomic<int>> calls;
    std::vector<Status> status;

    // mem holds the bytes of the target from first_sector on.
    BioSet(Bytes mem, BioDir dir, std::size_t sector_size, std::mt19937* rng, uint64_t first_sector = 0) {
        std::size_t pos = 0;
        while (pos < mem.size()) {
            std::size_t n = mem.size() - pos;
            if (rng) n = std::min(n, sector_size * (1 + (*rng)() % 6));
            std::vector<SgEntry> sg;
            for (std::size_t off = 0; off < n;) {
                std::size_t len = rng ? 1 + (*rng)() % (2 * sector_size) : n;
                if (rng && (*rng)() % 4 == 0) len = 1 + (*rng)() % 17;  // tiny, odd pieces
                len = std::min(len, n - off);
                sg.push_back({mem.data() + pos + off, len});
                off += len;
            }
            segs.push_back(std::move(sg));
            Bio b;
            b.sector = first_sector + pos / 512;
            b.dir = dir;
            b.vecs = segs.back();
            bios.push_back(std::move(b));
            pos += n;
        }
        calls = std::vector<std::atomic<int>>(bios.size());
        status.assign(bios.size(), Status::InProgress);
        for (std::size_t i = 0; i < bios.size(); ++i)
            bios[i].on_complete = [this, i](Status s) {
                status[i] = s;
                ++calls[i];
            };
    }

    // Submit all, wait, and check each bio completed once with Ok.
    void run(CryptTarget& tg) {
        for (auto& b : bios) REQUIRE(tg.submit(b) == Status::InProgress);
        tg.drain();
        for (std::size_t i = 0; i < bios.size(); ++i) {
            CHECK(calls[i].load() == 1);
            CHECK(status[i] == Status::Ok);
        }
    }
};

// Writes pt through the target into a fresh store; returns the store.
Buf write_image(const CryptTable& t, const Buf& pt, std::mt19937* rng, CryptTargetOptions opts = {}) {
    auto store = std::make_shared<MemoryStore>(pt.size());
    auto tg = target(t, store, opts);
    Buf mem = pt;
    BioSet(mem, BioDir::Write, t.sector_size, rng).run(*tg);
    CHECK(mem == pt);  // a write never changes the caller's memory
    return store->data();
}

// Reads the whole of image back through the target.
Buf read_image(const CryptTable& t, const Buf& image, std::mt19937* rng, CryptTargetOptions opts = {}) {
    auto store = std::make_shared<MemoryStore>(image.size());
    store->data() = image;
    auto tg = target(t, store, opts);
    Buf mem(image.size(), 0xee);
    BioSet(mem, BioDir::Read, t.sector_size, rng).run(*tg);
    CHECK(store->data() == image);  // a read never writes the store
    return mem;
}

// A store whose reads (or writes) fail.
class FailingStore final : public BackingStore {
public:
    FailingStore(std::size_t size, bool fail_reads) : mem_(size), fail_reads_(fail_reads) {}
    Status read(uint64_t off, Bytes out) override {
        return fail_reads_ ? Status::IoError : mem_.read(off, out);
    }
    Status write(uint64_t off, ConstBytes in) override {
        return fail_reads_ ? mem_.write(off, in) : Status::IoError;
    }
    uint64_t size() const override { return mem_.size(); }

private:
    MemoryStore mem_;
    bool fail_reads_;
};

// The tables of tests (2) and (3), with random keys.
std::vector<CryptTable> shape_tables(std::mt19937& rng) {
    return {
        table("aes-xts-plain64", hex(random_bytes(rng, 64)), 0, 512),
        table("aes-xts-plain64", hex(random_bytes(rng, 64)), 16, 4096, "iv_large_sectors"),
        table("aes-cbc-essiv:sha256", hex(random_bytes(rng, 32)), 7, 512),
        table("aes:64-cbc-lmk", hex(random_bytes(rng, 1040)), 3, 512),
    };
}

}  // namespace

TEST_CASE("dm engine: the kernel's golden images through bios", "[dmcrypt]") {
    // The manifest comes from a kernel run; the engine tests below cover the
    // same tables against the single-bio result if it is not there.
    auto cases = golden::read_manifest();
    if (cases.empty()) {
        WARN("no " << golden::kDir << "manifest.tsv: golden comparison skipped");
        return;
    }
    Buf plaintext;
    REQUIRE(read_file(golden::kDir + "plaintext.bin", &plaintext));
    std::mt19937 rng(1);
    std::size_t checked = 0;
    for (const auto& c : cases) {
        INFO("case " << c.name << " (" << c.cipher << ")");
        Buf ct;
        REQUIRE(read_file(golden::kDir + c.ct_file, &ct));
        REQUIRE(ct.size() == c.size);
        const Buf pt(plaintext.begin(), plaintext.begin() + static_cast<std::ptrdiff_t>(c.size));
        CryptTable t = table(c.cipher, c.key_hex, c.iv_offset, c.sector_size, c.opts);
        // Every case's algorithms exist (the generic provider has cipher_null
        // and adiantum's parts), so a target that cannot be made is a failure.
        auto probe = CryptTarget::create(registry(), t, std::make_shared<MemoryStore>(c.size));
        REQUIRE(probe);
        ++checked;

        // One big bio each way.
        CHECK(write_image(t, pt, nullptr) == ct);
        CHECK(read_image(t, ct, nullptr) == pt);
        // Random bios, requests of a few sectors, sync and through cryptd.
        for (bool async : {false, true}) {
            CryptTargetOptions o;
            o.max_request = c.sector_size * (1 + rng() % 3);
            o.force_async = async;
            INFO("max_request " << o.max_request << (async ? ", cryptd" : ""));
            CHECK(write_image(t, pt, &rng, o) == ct);
            CHECK(read_image(t, ct, &rng, o) == pt);
        }
    }
    CHECK(checked == cases.size());
}

TEST_CASE("dm engine: random bios and segmentations equal one bio", "[dmcrypt]") {
    std::mt19937 rng(2);
    for (const CryptTable& t : shape_tables(rng)) {
        INFO(t.cipher << " sector_size " << t.sector_size);
        const Buf pt = random_bytes(rng, 64 * 1024);
        const Buf want = write_image(t, pt, nullptr);
        CHECK(want != pt);
        CHECK(read_image(t, want, nullptr) == pt);
        for (int round = 0; round < 3; ++round) {
            CryptTargetOptions o;
            o.max_request = t.sector_size * (1 + rng() % 4);
            o.threads = 1 + rng() % 3;
            o.queue_depth = 1 + rng() % 6;
            INFO("round " << round << ", max_request " << o.max_request);
            CHECK(write_image(t, pt, &rng, o) == want);
            CHECK(read_image(t, want, &rng, o) == pt);
        }
    }
}

TEST_CASE("dm engine: cryptd gives the same store, concurrent submitters", "[dmcrypt]") {
    std::mt19937 rng(3);
    for (const CryptTable& t : shape_tables(rng)) {
        INFO(t.cipher << " sector_size " << t.sector_size);
        const Buf pt = random_bytes(rng, 128 * 1024);
        const Buf want = write_image(t, pt, nullptr);

        CryptTargetOptions async;
        async.force_async = true;
        async.max_request = 8192;
        async.queue_depth = 3;  // fewer slots than submitters: submit must block
        {
            auto store = std::make_shared<MemoryStore>(pt.size());
            auto tg = target(t, store, async);
            CHECK(tg->cipher_info().async);
            CHECK(tg->cipher_info().name == "cryptd(" + t.alg_name + ")");
            // Four threads, each writing its quarter through random bios.
            Buf mem = pt;
            const std::size_t quarter = pt.size() / 4;
            std::vector<std::thread> th;
            std::atomic<int> bad{0};
            for (unsigned k = 0; k < 4; ++k) {
                th.emplace_back([&, k] {
                    std::mt19937 r(100 + k);
                    BioSet set(Bytes(mem).subspan(k * quarter, quarter), BioDir::Write, t.sector_size,
                               &r, k * quarter / 512);
                    for (auto& b : set.bios)
                        if (tg->submit(b) != Status::InProgress) ++bad;
                    // Wait for this thread's bios only (drain waits for all).
                    for (std::size_t i = 0; i < set.bios.size(); ++i)
                        while (set.calls[i].load() == 0) std::this_thread::yield();
                    for (std::size_t i = 0; i < set.bios.size(); ++i)
                        if (set.status[i] != Status::Ok || set.calls[i].load() != 1) ++bad;
                });
            }
            for (auto& x : th) x.join();
            tg->drain();
            CHECK(bad.load() == 0);
            CHECK(store->data() == want);
            CHECK(mem == pt);
        }
        CHECK(read_image(t, want, &rng, async) == pt);
        // submit_sync on an async transform.
        {
            auto store = std::make_shared<MemoryStore>(pt.size());
            store->data() = want;
            auto tg = target(t, store, async);
            Buf mem(pt.size());
            Bio b;
            b.dir = BioDir::Read;
            b.vecs = {{mem.data(), mem.size()}};
            CHECK(tg->submit_sync(b) == Status::Ok);
            CHECK(mem == pt);
        }
    }
}

TEST_CASE("dm engine: completions may submit more bios", "[dmcrypt]") {
    // One worker, one slot: each completion submits two bios. The worker must
    // run queued work while it waits for room instead of deadlocking.
    std::mt19937 rng(4);
    auto t = table("aes-xts-plain64", hex(random_bytes(rng, 64)), 0, 512);
    const Buf pt = random_bytes(rng, 63 * 512);
    auto store = std::make_shared<MemoryStore>(pt.size());
    for (bool async : {false, true}) {
        CryptTargetOptions o;
        o.threads = 1;
        o.queue_depth = 1;
        o.force_async = async;
        auto tg = target(t, store, o);
        Buf mem = pt;
        std::vector<Bio> bios(63);
        std::atomic<int> done{0}, bad{0};
        for (std::size_t i = 0; i < bios.size(); ++i) {
            bios[i].sector = i;
            bios[i].dir = BioDir::Write;
            bios[i].vecs = {{mem.data() + 512 * i, 512}};
            bios[i].on_complete = [&, i](Status s) {
                if (s != Status::Ok) ++bad;
                ++done;
                for (std::size_t c : {2 * i + 1, 2 * i + 2})  // a binary tree of bios
                    if (c < bios.size() && tg->submit(bios[c]) != Status::InProgress) ++bad;
            };
        }
        REQUIRE(tg->submit(bios[0]) == Status::InProgress);
        while (done.load() < static_cast<int>(bios.size())) std::this_thread::yield();
        tg->drain();
        CHECK(bad.load() == 0);
        CHECK(store->data() == write_image(t, pt, nullptr));
    }
}

TEST_CASE("dm engine: run_inline equals submit, in the caller's thread", "[dmcrypt]") {
    std::mt19937 rng(11);
    auto t = table("aes-xts-plain64", hex(random_bytes(rng, 64)), 24, 4096);
    const Buf pt = random_bytes(rng, 16 * 4096);
    for (bool async : {false, true}) {
        auto store = std::make_shared<MemoryStore>(pt.size());
        CryptTargetOptions o;
        o.force_async = async;
        auto tg = target(t, store, o);
        std::atomic<int> calls{0};
        const auto caller = std::this_thread::get_id();
        std::atomic<bool> other_thread{false};
        auto run = [&](BioDir dir, uint8_t* data, std::size_t len, uint64_t sector) {
            Bio b;
            b.dir = dir;
            b.sector = sector;
            b.vecs = {{data, len / 2}, {data + len / 2, len - len / 2}};
            b.on_complete = [&](Status) {
                ++calls;
                if (std::this_thread::get_id() != caller) other_thread = true;
            };
            Status s = tg->run_inline(b);
            if (s == Status::InProgress) {  // only an async transform hands over
                CHECK(async);
                tg->drain();
                return Status::Ok;
            }
            return s;
        };
        Buf w = pt;
        for (std::size_t i = 0; i < 16; i += 4)
            REQUIRE(run(BioDir::Write, w.data() + i * 4096, 4 * 4096, i * 8) == Status::Ok);
        CHECK(w == pt);  // the caller's memory is only read
        CHECK(store->data() == write_image(t, pt, nullptr));
        Buf r(pt.size());
        REQUIRE(run(BioDir::Read, r.data(), r.size(), 0) == Status::Ok);
        CHECK(r == pt);
        if (!async) CHECK(calls.load() == 0);  // a final status, no completion
        if (async) CHECK(other_thread.load());
        CHECK(run(BioDir::Read, r.data(), 512, 0) == Status::Invalid);  // not a whole 4096-byte sector
        CHECK(run(BioDir::Read, r.data(), 4096, 128) == Status::Invalid);  // past the end
    }
}

TEST_CASE("dm engine: refusals and errors", "[dmcrypt]") {
    std::mt19937 rng(5);
    const std::string key64 = hex(random_bytes(rng, 64));
    auto store = std::make_shared<MemoryStore>(64 * 1024);

    SECTION("misaligned or out-of-range bios are refused without a completion") {
        auto t = table("aes-xts-plain64", key64, 0, 4096);
        auto tg = target(t, store);
        CHECK(tg->length_sectors() == 128);
        Buf mem(8192);
        int calls = 0;
        auto bio = [&](uint64_t sector, std::size_t len) {
            Bio b;
            b.sector = sector;
            b.dir = BioDir::Write;
            b.vecs = {{mem.data(), len}};
            b.on_complete = [&](Status) { ++calls; };
            return b;
        };
        for (auto [sector, len] : std::vector<std::pair<uint64_t, std::size_t>>{
                 {1, 4096},      // start not on a 4096-byte sector
                 {4, 4096},
                 {0, 512},       // size not a multiple of the sector size
                 {0, 4097},
                 {0, 0},         // empty
                 {128, 4096},    // past the end
                 {120, 8192},    // runs past the end
                 {~uint64_t{0} & ~uint64_t{7}, 4096}}) {
            Bio b = bio(sector, len);
            INFO("sector " << sector << " len " << b.size());
            CHECK(tg->submit(b) == Status::Invalid);
        }
        Bio nocb = bio(0, 4096);
        nocb.on_complete = nullptr;
        CHECK(tg->submit(nocb) == Status::Invalid);
        tg->drain();
        CHECK(calls == 0);
        // The last sector is fine.
        Bio last = bio(120, 4096);
        CHECK(tg->submit_sync(last) == Status::Ok);
        CHECK(calls == 0);  // submit_sync does not call on_complete
        CHECK(last.on_complete);  // ... and leaves it in place
    }

    SECTION("set-up errors name the cipher") {
        auto err = [&](const CryptTable& t, CryptTargetOptions o = {}) {
            auto r = CryptTarget::create(registry(), t, store, 0, o);
            REQUIRE(!r);
            return r.error().message;
        };
        CryptTable unknown = table("nosuchcipher-xts-plain64", key64, 0, 512);
        std::string m = err(unknown);
        CHECK(m.find("nosuchcipher-xts-plain64") != std::string::npos);
        CHECK(m.find("plain64(xts(nosuchcipher))") != std::string::npos);

        m = err(table("aes-xts-plain64", hex(random_bytes(rng, 63)), 0, 512));
        CHECK(m.find("key of 63 bytes refused") != std::string::npos);
        CHECK(m.find("aes-xts-plain64") != std::string::npos);
        CHECK(err(table("aes-cbc-essiv:sha256", hex(random_bytes(rng, 33)), 0, 512))
                  .find("key of 33 bytes refused") != std::string::npos);
        // 2 keys: each half must be an xts key.
        CHECK(err(table("aes:2-xts-plain64", hex(random_bytes(rng, 100)), 0, 512))
                  .find("key of 100 bytes refused") != std::string::npos);

        // The parser refuses what the kernel refuses...
        CHECK(!parse_crypt_args("aes:3-cbc-plain64 " + hex(random_bytes(rng, 96)) + " 0"));
        CHECK(!parse_crypt_args("aes:64-cbc-lmk " + hex(random_bytes(rng, 1040)) + " 0 1 sector_size:4096"));
        CHECK(!parse_crypt_args("aes-xts-plain64 " + key64 + " 7 1 sector_size:4096"));
        // ... and so does the target for tables built by hand.
        CryptTable lmk = table("aes:64-cbc-lmk", hex(random_bytes(rng, 1040)), 0, 512);
        lmk.sector_size = 4096;
        CHECK(err(lmk).find("aes:64-cbc-lmk") != std::string::npos);
        CryptTable off = table("aes-xts-plain64", key64, 0, 4096);
        off.iv_offset = 7;
        CHECK(err(off).find("iv_offset") != std::string::npos);
        CryptTable three = table("aes-cbc-plain64", hex(random_bytes(rng, 96)), 0, 512);
        three.key_count = 3;
        CHECK(err(three).find("aes-cbc-plain64") != std::string::npos);

        // Geometry.
        auto small = std::make_shared<MemoryStore>(4096 + 512);
        auto r = CryptTarget::create(registry(), table("aes-xts-plain64", key64, 0, 4096), small);
        REQUIRE(!r);
        CHECK(r.error().message.find("sector_size") != std::string::npos);
        CryptTargetOptions tiny;
        tiny.max_request = 511;
        CHECK(!CryptTarget::create(registry(), table("aes-xts-plain64", key64, 0, 512), store, 0, tiny));
    }

    SECTION("store errors complete the bio with IoError") {
        auto t = table("aes-xts-plain64", key64, 0, 512);
        for (bool async : {false, true}) {
            CryptTargetOptions o;
            o.force_async = async;
            for (bool fail_reads : {true, false}) {
                auto tg = target(t, std::make_shared<FailingStore>(8192, fail_reads), o);
                Buf mem(4096, 1);
                Bio b;
                b.sector = 2;
                b.dir = fail_reads ? BioDir::Read : BioDir::Write;
                b.vecs = {{mem.data(), 1000}, {mem.data() + 1000, 3096}};
                std::atomic<int> calls{0};
                Status got = Status::Ok;
                b.on_complete = [&](Status s) {
                    got = s;
                    ++calls;
                };
                REQUIRE(tg->submit(b) == Status::InProgress);
                tg->drain();
                CHECK(calls.load() == 1);
                CHECK(got == Status::IoError);
                CHECK(tg->submit_sync(b) == Status::IoError);
            }
        }
    }

    SECTION("a target at an offset in the store") {
        auto t = table("aes-xts-plain64", key64, 0, 512);
        t.offset = 16;
        auto tg = target(t, store);
        CHECK(tg->length_sectors() == 128 - 16);
        Buf pt = random_bytes(rng, 4096), mem = pt;
        Bio b;
        b.dir = BioDir::Write;
        b.vecs = {{mem.data(), mem.size()}};
        REQUIRE(tg->submit_sync(b) == Status::Ok);
        // Equals the same table at offset 0, shifted.
        t.offset = 0;
        Buf at0 = write_image(t, pt, nullptr);
        CHECK(Buf(store->data().begin() + 16 * 512, store->data().begin() + 16 * 512 + 4096) == at0);
        CHECK(mem == pt);
    }
}

TEST_CASE("dm engine: file store", "[dmcrypt]") {
    char path[] = "/tmp/blkcrypt-store-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    Buf zeros(8192, 0);
    REQUIRE(::write(fd, zeros.data(), zeros.size()) == 8192);
    ::close(fd);
    {
        auto ro = open_file_store(path, false);
        REQUIRE(ro);
        CHECK((*ro)->size() == 8192);
        Buf b(16);
        CHECK((*ro)->write(0, b) == Status::IoError);  // read-only
        CHECK((*ro)->read(8192 - 8, b) == Status::IoError);  // past the end
        auto rw = open_file_store(path, true);
        REQUIRE(rw);
        std::mt19937 rng(6);
        Buf pt = random_bytes(rng, 8192);
        auto tg = target(table("aes-xts-plain64", hex(random_bytes(rng, 64)), 0, 512), *rw);
        Buf mem = pt;
        Bio w;
        w.dir = BioDir::Write;
        w.vecs = {{mem.data(), mem.size()}};
        REQUIRE(tg->submit_sync(w) == Status::Ok);
        CHECK((*rw)->flush() == Status::Ok);
        Buf back(8192);
        Bio r;
        r.vecs = {{back.data(), back.size()}};
        REQUIRE(tg->submit_sync(r) == Status::Ok);
        CHECK(back == pt);
        Buf raw(8192);
        REQUIRE((*ro)->read(0, raw) == Status::Ok);
        CHECK(raw != pt);
    }
    ::unlink(path);
    auto missing = open_file_store(path, false);
    REQUIRE(!missing);
    CHECK(missing.error().status == Status::IoError);
    CHECK(missing.error().message.find(path) != std::string::npos);
}
