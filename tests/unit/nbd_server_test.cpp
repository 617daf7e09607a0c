// The NBD server's protocol over a memory transport: option haggling, the
// advertised sizes and flags, replies matched by cookie, unaligned writes
// sharing blocks (read-modify-write under the range locks), limits and
// errors, and the dm-crypt device under it.
#include "test_util.hpp"
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/targets.hpp>
#include <blkcrypt/nbd/protocol.hpp>
#include <blkcrypt/nbd/server.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <chrono>
#include <vector>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

using namespace blkcrypt;
namespace proto = blkcrypt::nbd::proto;

namespace {

// What the client sends, scripted up front; what the server sent, recorded.
class Script final : public nbd::Transport {
public:
    std::vector<uint8_t> in, out;
    bool read(Bytes b) override {
        if (b.size() > in.size() - pos_) return false;
        std::memcpy(b.data(), in.data() + pos_, b.size());
        pos_ += b.size();
        return true;
    }
    bool write(ConstBytes b) override {
        std::lock_guard lk(mu_);
        out.insert(out.end(), b.begin(), b.end());
        return true;
    }
    void u16(uint16_t v) { in.push_back(uint8_t(v >> 8)), in.push_back(uint8_t(v)); }
    void u32(uint32_t v) { u16(uint16_t(v >> 16)), u16(uint16_t(v)); }
    void u64(uint64_t v) { u32(uint32_t(v >> 32)), u32(uint32_t(v)); }
    void bytes(ConstBytes b) { in.insert(in.end(), b.begin(), b.end()); }
    void option(uint32_t opt, ConstBytes data = {}) {
        u64(proto::kOptMagic), u32(opt), u32(uint32_t(data.size())), bytes(data);
    }
    void go(const std::string& name = "") {
        u64(proto::kOptMagic), u32(proto::kOptGo), u32(uint32_t(4 + name.size() + 2 + 2));
        u32(uint32_t(name.size()));
        bytes(testutil::text(name));
        u16(1), u16(proto::kInfoBlockSize);
    }
    void request(uint16_t type, uint64_t cookie, uint64_t off, uint32_t len, uint16_t flags = 0) {
        u32(proto::kRequestMagic), u16(flags), u16(type), u64(cookie), u64(off), u32(len);
    }

private:
    std::size_t pos_ = 0;
    std::mutex mu_;
};

// Reads back the server's bytes.
struct Parse {
    const std::vector<uint8_t>& b;
    std::size_t p = 0;
    uint64_t n(int bytes) {
        REQUIRE(p + bytes <= b.size());
        uint64_t v = 0;
        for (int i = 0; i < bytes; ++i) v = v << 8 | b[p++];
        return v;
    }
    std::vector<uint8_t> take(std::size_t len) {
        REQUIRE(p + len <= b.size());
        std::vector<uint8_t> v(b.begin() + long(p), b.begin() + long(p + len));
        p += len;
        return v;
    }
    void hello() {
        CHECK(n(8) == proto::kNbdMagic);
        CHECK(n(8) == proto::kOptMagic);
        CHECK(n(2) == (proto::kFlagFixedNewstyle | proto::kFlagNoZeroes));
    }
    struct OptReply {
        uint32_t opt, type;
        std::vector<uint8_t> data;
    };
    OptReply opt_reply() {
        CHECK(n(8) == proto::kOptReplyMagic);
        OptReply r;
        r.opt = uint32_t(n(4));
        r.type = uint32_t(n(4));
        r.data = take(std::size_t(n(4)));
        return r;
    }
    // Option replies up to the ACK; returns the INFO payloads by type.
    std::map<uint16_t, std::vector<uint8_t>> until_ack() {
        std::map<uint16_t, std::vector<uint8_t>> info;
        for (;;) {
            auto r = opt_reply();
            if (r.type == proto::kRepAck) return info;
            REQUIRE(r.type == proto::kRepInfo);
            info[uint16_t(r.data[0] << 8 | r.data[1])] = r.data;
        }
    }
};

uint32_t be32(const std::vector<uint8_t>& v, std::size_t at) {
    return uint32_t(v[at]) << 24 | uint32_t(v[at + 1]) << 16 | uint32_t(v[at + 2]) << 8 | v[at + 3];
}

struct SimpleReply {
    uint32_t error;
    std::vector<uint8_t> data;
};

// Simple replies, each read's data sized from `lengths` (cookie -> bytes).
std::map<uint64_t, SimpleReply> simple_replies(Parse& p, std::map<uint64_t, std::size_t> lengths) {
    std::map<uint64_t, SimpleReply> out;
    while (p.p < p.b.size()) {
        REQUIRE(p.n(4) == proto::kSimpleReplyMagic);
        const auto err = uint32_t(p.n(4));
        const uint64_t cookie = p.n(8);
        out[cookie] = {err, err ? std::vector<uint8_t>{} : p.take(lengths[cookie])};
    }
    return out;
}

// Structured replies (one chunk each, flagged done): cookie -> (type, payload).
std::map<uint64_t, std::pair<uint16_t, std::vector<uint8_t>>> structured_replies(Parse& p) {
    std::map<uint64_t, std::pair<uint16_t, std::vector<uint8_t>>> out;
    while (p.p < p.b.size()) {
        REQUIRE(p.n(4) == proto::kStructuredReplyMagic);
        CHECK(p.n(2) == proto::kReplyFlagDone);
        const auto type = uint16_t(p.n(2));
        const uint64_t cookie = p.n(8);
        out[cookie] = {type, p.take(std::size_t(p.n(4)))};
    }
    return out;
}

// Slow writes: a read-modify-write of a block shared with a write still in
// flight would read the old bytes without the range locks.
class SlowStore final : public BackingStore {
public:
    explicit SlowStore(std::shared_ptr<MemoryStore> m) : m_(std::move(m)) {}
    Status read(uint64_t o, Bytes out) override { return m_->read(o, out); }
    Status write(uint64_t o, ConstBytes in) override {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return m_->write(o, in);
    }
    uint64_t size() const override { return m_->size(); }

private:
    std::shared_ptr<MemoryStore> m_;
};

std::shared_ptr<dm::BlockDevice> store_device(std::shared_ptr<MemoryStore> m, uint32_t bs, bool ro = false) {
    dm::StoreDeviceOptions o;
    o.block_size = bs;
    o.read_only = ro;
    o.threads = 3;
    auto d = dm::make_store_device(std::move(m), o);
    REQUIRE(d);
    return *d;
}

}  // namespace

TEST_CASE("nbd: GO tells size, flags and block sizes, and unaligned writes sharing blocks all land", "[nbd]") {
    auto mem = std::make_shared<MemoryStore>(256 * 1024);
    std::mt19937 rng(3);
    for (auto& b : mem->data()) b = uint8_t(rng());
    std::vector<uint8_t> model = mem->data();
    nbd::Limits lim;
    lim.max_request = 64 * 1024;
    dm::StoreDeviceOptions so;
    so.block_size = 4096;
    so.threads = 4;
    auto dev = dm::make_store_device(std::make_shared<SlowStore>(mem), so);
    REQUIRE(dev);
    nbd::Export exp("disk", *dev, lim);

    // Writes of 1..3000 bytes at random offsets, disjoint but mostly sharing
    // 4 KiB blocks with their neighbours, all in flight at once.
    Script s;
    s.u32(proto::kClientFixedNewstyle | proto::kClientNoZeroes);
    s.go("disk");
    uint64_t off = 17;
    for (uint64_t cookie = 1; off < 200 * 1024; ++cookie) {
        const uint32_t len = 1 + rng() % 3000;
        std::vector<uint8_t> d(len);
        for (auto& b : d) b = uint8_t(rng());
        std::memcpy(model.data() + off, d.data(), len);
        s.request(proto::kCmdWrite, cookie, off, len, cookie % 5 ? 0 : proto::kCmdFlagFua);
        s.bytes(d);
        off += len + rng() % 100;
    }
    s.request(proto::kCmdDisc, 0, 0, 0);
    const auto st = nbd::serve_connection(exp, s);
    CHECK(st.end == "disconnect");
    CHECK(st.errors == 0);

    Parse p{s.out};
    p.hello();
    auto info = p.until_ack();
    REQUIRE(info.count(proto::kInfoExport));
    const auto& e = info[proto::kInfoExport];
    CHECK(be32(e, 2) == 0);
    CHECK(be32(e, 6) == 256 * 1024);
    const uint16_t flags = uint16_t(e[10] << 8 | e[11]);
    CHECK(flags == (proto::kHasFlags | proto::kSendFlush | proto::kSendFua | proto::kSendWriteZeroes |
                    proto::kCanMultiConn | proto::kSendCache));
    REQUIRE(info.count(proto::kInfoBlockSize));
    CHECK(be32(info[proto::kInfoBlockSize], 2) == 4096);               // minimum: the sector size
    CHECK(be32(info[proto::kInfoBlockSize], 10) == 64 * 1024);        // maximum: the limit
    for (const auto& [cookie, r] : simple_replies(p, {})) CHECK(r.error == 0);
    CHECK(mem->data() == model);

    // Reads at any alignment, all in flight, answered by cookie.
    Script r;
    r.u32(proto::kClientFixedNewstyle | proto::kClientNoZeroes);
    r.go();
    std::map<uint64_t, std::size_t> lengths;
    std::map<uint64_t, uint64_t> offsets;
    for (uint64_t cookie = 1; cookie <= 100; ++cookie) {
        const uint32_t len = 1 + rng() % 20000;
        const uint64_t o = rng() % (256 * 1024 - len);
        lengths[cookie] = len;
        offsets[cookie] = o;
        r.request(proto::kCmdRead, cookie, o, len);
    }
    (void)nbd::serve_connection(exp, r);
    Parse q{r.out};
    q.hello();
    q.until_ack();
    const auto replies = simple_replies(q, lengths);
    REQUIRE(replies.size() == 100);
    for (const auto& [cookie, rep] : replies) {
        REQUIRE(rep.error == 0);
        CHECK(std::equal(rep.data.begin(), rep.data.end(), model.begin() + long(offsets[cookie])));
    }
}

TEST_CASE("nbd: limits, ranges and unknown commands get errors and the stream stays in step", "[nbd]") {
    auto mem = std::make_shared<MemoryStore>(64 * 1024);
    nbd::Limits lim;
    lim.max_request = 16 * 1024;
    nbd::Export exp("", store_device(mem, 512), lim);
    Script s;
    s.u32(proto::kClientFixedNewstyle);
    s.option(proto::kOptStructuredReply);
    s.go();
    s.request(proto::kCmdRead, 1, 0, 16 * 1024 + 1);                   // over the maximum
    s.request(proto::kCmdWrite, 2, 0, 1 << 20);                         // over: payload dropped
    s.bytes(std::vector<uint8_t>(1 << 20, 0xaa));
    s.request(proto::kCmdRead, 3, UINT64_MAX - 100, 200);               // overflows
    s.request(proto::kCmdWrite, 4, 64 * 1024 - 1, 2);                   // past the end
    s.bytes(std::vector<uint8_t>(2, 0xbb));
    s.request(proto::kCmdTrim, 5, 0, 512);                              // not advertised
    s.request(42, 6, 0, 0);                                             // unknown
    s.request(proto::kCmdRead, 7, 0, 512, proto::kCmdFlagFua);          // flag not for reads
    s.request(proto::kCmdWriteZeroes, 8, 100, 30000);                   // zeroes, unaligned
    s.request(proto::kCmdFlush, 9, 0, 0);
    s.request(proto::kCmdCache, 10, 0, 4096);
    s.request(proto::kCmdDisc, 0, 0, 0);
    std::fill(mem->data().begin(), mem->data().end(), 0x77);
    std::vector<std::string> reported;  // what --json reports, one per error reply
    nbd::ConnectionOptions co;
    co.on_error = [&](const nbd::RequestError& e) {
        reported.push_back(nbd::command_name(e.command) + " " + std::to_string(e.offset) + " " +
                           std::to_string(e.length) + " " + nbd::error_name(e.error));
    };
    const auto st = nbd::serve_connection(exp, s, co);
    std::sort(reported.begin(), reported.end());
    CHECK(reported == std::vector<std::string>{"command 42 0 0 EINVAL", "read 0 16385 EINVAL", "read 0 512 EINVAL",
                                               "read 18446744073709551515 200 EINVAL", "trim 0 512 EINVAL",
                                               "write 0 1048576 EINVAL", "write 65535 2 ENOSPC"});
    CHECK(st.end == "disconnect");
    CHECK(st.structured);

    Parse p{s.out};
    p.hello();
    CHECK(p.opt_reply().type == proto::kRepAck);
    p.until_ack();
    std::map<uint64_t, uint32_t> err;
    for (const auto& [cookie, r] : structured_replies(p)) {
        err[cookie] = r.first == proto::kReplyTypeError ? be32(r.second, 0) : 0;
        if (r.first != proto::kReplyTypeError) CHECK(r.first == proto::kReplyTypeNone);
    }
    CHECK(err == std::map<uint64_t, uint32_t>{{1, proto::kEinval}, {2, proto::kEinval}, {3, proto::kEinval},
                                              {4, proto::kEnospc}, {5, proto::kEinval}, {6, proto::kEinval},
                                              {7, proto::kEinval}, {8, 0}, {9, 0}, {10, 0}});
    for (std::size_t i = 0; i < mem->data().size(); ++i) {
        const uint8_t want = i >= 100 && i < 30100 ? 0 : 0x77;
        if (mem->data()[i] != want) FAIL("byte " << i << " is " << int(mem->data()[i]));
    }
}

TEST_CASE("nbd: options: LIST, unknown option, unknown export, read-only, ABORT", "[nbd]") {
    auto mem = std::make_shared<MemoryStore>(8192);
    nbd::Export exp("disk", store_device(mem, 512, true));
    Script s;
    s.u32(proto::kClientFixedNewstyle);
    s.option(proto::kOptList);
    s.option(1234, std::vector<uint8_t>(10, 1));
    s.go("other");
    s.option(proto::kOptInfo, std::vector<uint8_t>{0, 0, 0, 9});        // malformed
    s.option(proto::kOptAbort);
    CHECK(nbd::serve_connection(exp, s).end == "abort");
    Parse p{s.out};
    p.hello();
    auto list = p.opt_reply();
    CHECK(list.type == proto::kRepServer);
    CHECK(std::string(list.data.begin() + 4, list.data.end()) == "disk");
    CHECK(p.opt_reply().type == proto::kRepAck);
    CHECK(p.opt_reply().type == proto::kRepErrUnsup);
    CHECK(p.opt_reply().type == proto::kRepErrUnknown);
    CHECK(p.opt_reply().type == proto::kRepErrInvalid);
    CHECK(p.opt_reply().type == proto::kRepAck);

    Script w;  // a read-only export refuses writes, payload read
    w.u32(proto::kClientFixedNewstyle);
    w.go();
    w.request(proto::kCmdWrite, 1, 0, 512);
    w.bytes(std::vector<uint8_t>(512, 1));
    w.request(proto::kCmdRead, 2, 0, 512);
    (void)nbd::serve_connection(exp, w);
    Parse q{w.out};
    q.hello();
    auto info = q.until_ack();
    CHECK((info[proto::kInfoExport][11] & proto::kReadOnly) != 0);
    CHECK((info[proto::kInfoExport][11] & proto::kSendFlush) == 0);
    auto rep = simple_replies(q, {{2, 512}});
    CHECK(rep[1].error == proto::kEperm);
    CHECK(rep[2].error == 0);

    Script bad;  // unknown client flags: hang up
    bad.u32(0x80);
    CHECK(nbd::serve_connection(exp, bad).end.find("protocol error") == 0);
}

TEST_CASE("nbd: a dm-crypt device stores what the target reads back", "[nbd]") {
    auto t = dm::parse_crypt_args("aes-xts-plain64 " + std::string(128, '5') + " 0 1 sector_size:4096");
    REQUIRE(t);
    auto mem = std::make_shared<MemoryStore>(128 * 1024);
    dm::CryptTargetOptions o;
    o.threads = 2;
    auto tg = dm::CryptTarget::create(testutil::registry(), *t, mem, 0, o);
    REQUIRE(tg);
    std::shared_ptr<dm::CryptTarget> target = std::move(tg).value();
    nbd::Export exp("", dm::make_crypt_device(target, mem, false));
    CHECK(exp.device().block_size() == 4096);
    Script s;
    s.u32(proto::kClientFixedNewstyle);
    s.go();
    std::vector<uint8_t> data(10000);
    std::mt19937 rng(9);
    for (auto& b : data) b = uint8_t(rng());
    s.request(proto::kCmdWrite, 1, 5000, 10000);
    s.bytes(data);
    s.request(proto::kCmdDisc, 0, 0, 0);
    (void)nbd::serve_connection(exp, s);
    std::vector<uint8_t> plain(128 * 1024);
    dm::Bio bio;
    bio.vecs = {{plain.data(), plain.size()}};
    REQUIRE(target->submit_sync(bio) == Status::Ok);
    CHECK(std::equal(data.begin(), data.end(), plain.begin() + 5000));
    CHECK(mem->data() != plain);  // ciphertext underneath
    CHECK((exp.transmission_flags() & proto::kSendTrim) == 0);  // the table has no allow_discards
}

TEST_CASE("nbd: a stop ends a connection whose client no longer reads its replies", "[nbd]") {
    char dir[] = "/tmp/nbd-test-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    const std::string path = std::string(dir) + "/s.sock";
    auto mem = std::make_shared<MemoryStore>(4 << 20);
    auto exp = std::make_shared<nbd::Export>("", store_device(mem, 512));
    nbd::ServerOptions so;
    so.socket_path = path;
    so.send_timeout_ms = 300;
    auto srv = nbd::Server::listen(exp, so);
    REQUIRE(srv);
    std::thread runner([&] { (void)(*srv)->run(); });

    // 64 reads of 1 MiB and never a byte read back: the replies fill the socket.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    Script s;
    s.u32(proto::kClientFixedNewstyle | proto::kClientNoZeroes);
    s.go();
    for (uint64_t c = 1; c <= 64; ++c) s.request(proto::kCmdRead, c, 0, 1 << 20);
    REQUIRE(::send(fd, s.in.data(), s.in.size(), MSG_NOSIGNAL) == ssize_t(s.in.size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));

    const auto t0 = std::chrono::steady_clock::now();
    (*srv)->stop();
    runner.join();
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took < std::chrono::seconds(5));
    ::close(fd);
    srv->reset();
    CHECK(::access(path.c_str(), F_OK) != 0);  // the socket is removed
    ::rmdir(dir);
}

TEST_CASE("nbd: two connections writing neighbouring bytes of the same blocks lose nothing", "[nbd]") {
    auto mem = std::make_shared<MemoryStore>(128 * 1024);
    std::vector<uint8_t> model = mem->data();
    dm::StoreDeviceOptions so;
    so.block_size = 4096;
    so.threads = 4;
    auto dev = dm::make_store_device(std::make_shared<SlowStore>(mem), so);
    REQUIRE(dev);
    nbd::Export exp("", *dev);
    Script a, b;
    for (Script* s : {&a, &b}) {
        s->u32(proto::kClientFixedNewstyle | proto::kClientNoZeroes);
        s->go();
    }
    // Alternate 700-byte pieces between the connections: most blocks get
    // pieces from both.
    std::mt19937 rng(5);
    uint64_t cookie = 1;
    for (uint64_t off = 0; off + 700 <= 120 * 1024; off += 700, ++cookie) {
        std::vector<uint8_t> d(700);
        for (auto& x : d) x = uint8_t(rng());
        std::memcpy(model.data() + off, d.data(), d.size());
        Script& s = cookie % 2 ? a : b;
        s.request(proto::kCmdWrite, cookie, off, 700);
        s.bytes(d);
    }
    std::thread t1([&] { (void)nbd::serve_connection(exp, a); });
    std::thread t2([&] { (void)nbd::serve_connection(exp, b); });
    t1.join();
    t2.join();
    CHECK(mem->data() == model);
}

TEST_CASE("nbd: base:allocation: LIST and SET_META_CONTEXT, BLOCK_STATUS maps a sparse file's holes", "[nbd]") {
    char path[] = "/tmp/blkcrypt-nbd-sparse-XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 1 << 20) == 0);
    const std::vector<uint8_t> d(64 * 1024, 0xab);
    REQUIRE(::pwrite(fd, d.data(), 64 * 1024, 64 * 1024) == 64 * 1024);
    REQUIRE(::pwrite(fd, d.data(), 4096, 512 * 1024) == 4096);
    ::close(fd);
    auto store = open_file_store(path, false);
    ::unlink(path);
    REQUIRE(store);
    dm::StoreDeviceOptions so;
    so.read_only = true;
    auto dev = dm::make_store_device(*store, so);
    REQUIRE(dev);
    nbd::Export exp("disk", *dev);

    auto meta = [](Script& s, uint32_t opt, std::vector<std::string> queries) {
        std::vector<uint8_t> v;
        auto u32 = [&](uint32_t x) {
            for (int i = 24; i >= 0; i -= 8) v.push_back(uint8_t(x >> i));
        };
        u32(4), v.insert(v.end(), {'d', 'i', 's', 'k'});
        u32(uint32_t(queries.size()));
        for (const auto& q : queries) u32(uint32_t(q.size())), v.insert(v.end(), q.begin(), q.end());
        s.option(opt, v);
    };
    Script s;
    s.u32(proto::kClientFixedNewstyle | proto::kClientNoZeroes);
    meta(s, proto::kOptListMetaContext, {});                        // all contexts
    meta(s, proto::kOptSetMetaContext, {"base:allocation"});        // before structured replies
    s.option(proto::kOptStructuredReply);
    meta(s, proto::kOptListMetaContext, {"qemu:dirty-bitmap:x"});   // not ours
    meta(s, proto::kOptSetMetaContext, {"other:x", "base:allocation"});
    s.go("disk");
    s.request(proto::kCmdBlockStatus, 1, 0, 1 << 20);
    s.request(proto::kCmdBlockStatus, 2, 70 * 1024, 500 * 1024, proto::kCmdFlagReqOne);
    s.request(proto::kCmdBlockStatus, 3, 1 << 20, 512);              // past the end
    s.request(proto::kCmdDisc, 0, 0, 0);
    CHECK(nbd::serve_connection(exp, s).end == "disconnect");

    Parse p{s.out};
    p.hello();
    auto ctx = p.opt_reply();
    CHECK(ctx.type == proto::kRepMetaContext);
    CHECK(be32(ctx.data, 0) == proto::kAllocationContextId);
    CHECK(std::string(ctx.data.begin() + 4, ctx.data.end()) == "base:allocation");
    CHECK(p.opt_reply().type == proto::kRepAck);
    CHECK(p.opt_reply().type == proto::kRepErrInvalid);
    CHECK(p.opt_reply().type == proto::kRepAck);   // structured replies
    CHECK(p.opt_reply().type == proto::kRepAck);   // nothing listed
    CHECK(p.opt_reply().type == proto::kRepMetaContext);
    CHECK(p.opt_reply().type == proto::kRepAck);
    p.until_ack();
    std::map<uint64_t, std::vector<std::pair<uint32_t, uint32_t>>> maps;
    std::map<uint64_t, uint32_t> err;
    for (const auto& [cookie, r] : structured_replies(p)) {
        const auto& [type, data] = r;
        if (type == proto::kReplyTypeError) {
            err[cookie] = be32(data, 0);
            continue;
        }
        REQUIRE(type == proto::kReplyTypeBlockStatus);
        CHECK(be32(data, 0) == proto::kAllocationContextId);
        for (std::size_t i = 4; i + 8 <= data.size(); i += 8) maps[cookie].emplace_back(be32(data, i), be32(data, i + 4));
    }
    const uint32_t hole = proto::kStateHole | proto::kStateZero;
    using M = std::vector<std::pair<uint32_t, uint32_t>>;
    CHECK(maps[1] == M{{64 * 1024, hole}, {64 * 1024, 0}, {384 * 1024, hole}, {4096, 0}, {508 * 1024, hole}});
    CHECK(maps[2] == M{{58 * 1024, 0}});  // the one extent at 70 KiB: data to 128 KiB
    CHECK(err == std::map<uint64_t, uint32_t>{{3, proto::kEinval}});

    Script n;  // BLOCK_STATUS without a context selected
    n.u32(proto::kClientFixedNewstyle | proto::kClientNoZeroes);
    n.option(proto::kOptStructuredReply);
    n.go();
    n.request(proto::kCmdBlockStatus, 1, 0, 4096);
    (void)nbd::serve_connection(exp, n);
    Parse q{n.out};
    q.hello();
    q.opt_reply();
    q.until_ack();
    REQUIRE(q.n(4) == proto::kStructuredReplyMagic);
    q.n(2);
    CHECK(q.n(2) == proto::kReplyTypeError);
}

TEST_CASE("nbd: TLS modes: off refuses STARTTLS, require refuses all else until it, the upgrade forgets the past",
          "[nbd]") {
    auto mem = std::make_shared<MemoryStore>(8192);
    nbd::Export exp("", store_device(mem, 512));
    // A transport whose upgrade works (the socket one runs a TLS handshake).
    class Upgradable final : public nbd::Transport {
    public:
        Script s;
        bool upgraded = false;
        bool read(Bytes b) override { return s.read(b); }
        bool write(ConstBytes b) override { return s.write(b); }
        bool start_tls() override { return upgraded = true; }
    };

    Upgradable off;
    off.s.u32(proto::kClientFixedNewstyle);
    off.s.option(proto::kOptStartTls);
    off.s.option(proto::kOptAbort);
    CHECK(nbd::serve_connection(exp, off, {.tls = nbd::TlsMode::Off, .on_error = {}}).end == "abort");
    CHECK_FALSE(off.upgraded);
    Parse p0{off.s.out};
    p0.hello();
    CHECK(p0.opt_reply().type == proto::kRepErrUnsup);

    Upgradable req;
    req.s.u32(proto::kClientFixedNewstyle);
    req.s.option(proto::kOptStructuredReply);   // before TLS: refused
    req.s.go();                                  // refused
    req.s.option(proto::kOptStartTls, std::vector<uint8_t>{1});  // with data: invalid
    req.s.option(proto::kOptStartTls);
    req.s.option(proto::kOptStartTls);           // twice: invalid
    req.s.go();                                  // now served, simple replies
    req.s.request(proto::kCmdRead, 7, 0, 512);
    req.s.request(proto::kCmdDisc, 0, 0, 0);
    const auto st = nbd::serve_connection(exp, req, {.tls = nbd::TlsMode::Require, .on_error = {}});
    CHECK(st.end == "disconnect");
    CHECK(st.tls);
    CHECK_FALSE(st.structured);
    CHECK(req.upgraded);
    Parse p{req.s.out};
    p.hello();
    CHECK(p.opt_reply().type == proto::kRepErrTlsReqd);
    CHECK(p.opt_reply().type == proto::kRepErrTlsReqd);
    CHECK(p.opt_reply().type == proto::kRepErrInvalid);
    CHECK(p.opt_reply().type == proto::kRepAck);
    CHECK(p.opt_reply().type == proto::kRepErrInvalid);
    p.until_ack();
    auto rep = simple_replies(p, {{7, 512}});
    CHECK(rep.size() == 1);
    CHECK(rep[7].error == 0);

    Upgradable old;  // the old-style EXPORT_NAME before TLS: hang up
    old.s.u32(proto::kClientFixedNewstyle);
    old.s.option(proto::kOptExportName);
    CHECK(nbd::serve_connection(exp, old, {.tls = nbd::TlsMode::Require, .on_error = {}}).end.find("protocol error") == 0);
}
