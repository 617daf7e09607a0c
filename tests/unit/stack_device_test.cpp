// Device-mapper tables in userspace: the table file parser (lines, gaps,
// arguments, errors without key material), the segment concatenation
// (splits, first failure, boundaries on the largest block size), and tables
// built over memory stores and over each other.
#include "test_util.hpp"
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/dm/targets.hpp>

#include <catch2/catch.hpp>

#include <map>
#include <numeric>

using namespace blkcrypt;

namespace {

const std::string kKey(64, 'a');  // AES-128-XTS, hex

std::shared_ptr<dm::BlockDevice> plain(std::shared_ptr<BackingStore> s) {
    dm::StoreDeviceOptions o;
    o.threads = 2;
    auto d = dm::make_store_device(std::move(s), o);
    REQUIRE(d);
    return *d;
}

std::vector<uint8_t> pattern(std::size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + i / 512);
    return v;
}

std::shared_ptr<MemoryStore> filled(std::size_t n, uint8_t seed) {
    auto m = std::make_shared<MemoryStore>(n);
    const auto p = pattern(n, seed);
    REQUIRE(m->write(0, ConstBytes(p.data(), p.size())) == Status::Ok);
    return m;
}

// Tables over memory stores named by path; "/dev/mapper/X" is `named`'s.
struct Stores {
    std::map<std::string, std::shared_ptr<MemoryStore>> files;
    std::map<std::string, std::shared_ptr<dm::BlockDevice>> mapper;
    std::map<std::string, bool> opened_writable;
    Result<std::shared_ptr<dm::BlockDevice>> build(const std::string& text, bool read_only = false) {
        auto lines = dm::parse_dm_table(text);
        if (!lines) return lines.error();
        dm::DmBuildOptions o;
        o.read_only = read_only;
        o.threads = 2;
        o.named = [this](const std::string& n) -> std::shared_ptr<dm::BlockDevice> {
            auto it = mapper.find(n);
            return it == mapper.end() ? nullptr : it->second;
        };
        o.open = [this](const std::string& p, bool w) -> Result<std::shared_ptr<BackingStore>> {
            auto it = files.find(p);
            if (it == files.end()) return make_error(Status::IoError, "cannot open '" + p + "'");
            opened_writable[p] = w;
            return std::shared_ptr<BackingStore>(it->second);
        };
        return dm::build_dm_table(testutil::registry(), *lines, o);
    }
};

std::string error_of(std::string_view text) {
    auto r = dm::parse_dm_table(text);
    REQUIRE_FALSE(r);
    return r.error().message;
}

}  // namespace

TEST_CASE("dm table: lines, comments and every target's arguments", "[dm_table]") {
    auto r = dm::parse_dm_table("# top\n\n0 8 zero\n8 8 error\r\n 16\t8 linear /a 4\n24 8 crypt aes-xts-plain64 " +
                                 kKey + " 0 /b 16\n");
    REQUIRE(r);
    REQUIRE(r->size() == 4);
    CHECK((*r)[0].line_no == 3);
    CHECK((*r)[1].target == "error");
    CHECK((*r)[2].device == "/a");
    CHECK((*r)[2].offset == 4);
    CHECK((*r)[2].start == 16);
    REQUIRE((*r)[3].crypt);
    CHECK((*r)[3].crypt->device == "/b");
    CHECK((*r)[3].crypt->offset == 16);
    CHECK((*r)[3].crypt->key.size() == 32);
    CHECK((*r)[3].line_no == 6);
}

TEST_CASE("dm table: format_dm_table writes what parse_dm_table reads", "[dm_table]") {
    const std::string root(64, 'a');
    const std::string text = "0 8 zero\n8 8 linear /a 4\n16 8 crypt aes-xts-plain64 " + kKey +
                             " 0 /b 16 1 sector_size:4096\n24 64 verity 1 /d /h 4096 4096 8 1 sha256 " + root +
                             " -\n";
    auto r = dm::parse_dm_table(text);
    REQUIRE(r);
    CHECK(dm::format_dm_table(*r, true) == text);
    // Without show_key the key is zeros, nothing else changes.
    std::string hidden = text;
    hidden.replace(hidden.find(kKey), kKey.size(), std::string(kKey.size(), '0'));
    CHECK(dm::format_dm_table(*r, false) == hidden);
    // A format's one-line table: crypt_line places it at 0 over the device.
    auto c = dm::parse_cipher_spec("aes-cbc-essiv:sha256");
    REQUIRE(c);
    c->offset = 4096;
    c->key.assign(ConstBytes(reinterpret_cast<const uint8_t*>("0123456789abcdef"), 16));
    const dm::DmTable one{dm::crypt_line(*c, 100, "/dev/x")};
    CHECK(dm::format_dm_table(one, false) == "0 100 crypt aes-cbc-essiv:sha256 " + std::string(32, '0') +
                                                " 0 /dev/x 4096\n");
    auto back = dm::parse_dm_table(dm::format_dm_table(one, true));
    REQUIRE(back);
    CHECK(back->front().crypt->key.size() == 16);
    CHECK(back->front().length == 100);
}

TEST_CASE("dm table: refusals name the line and never the key", "[dm_table]") {
    CHECK(error_of("0 8 zero\n16 8 zero") == "line 2: gap in the table: sector 16, expected 8");
    CHECK(error_of("0 8 zero\n4 8 zero").rfind("line 2: overlap in the table", 0) == 0);
    CHECK(error_of("0 0 zero") == "line 1: zero-length target");
    CHECK(error_of("8 8 zero").find("gap") != std::string::npos);
    CHECK(error_of("0 8") == "line 1: expected '<start> <length> <target> [<args>...]'");
    CHECK(error_of("0 -8 zero").find("invalid start or length") != std::string::npos);
    CHECK(error_of("0 8 zero 1") == "line 1: zero: no arguments expected");
    CHECK(error_of("0 8 linear /a") == "line 1: linear: expected '<device> <offset>'");
    CHECK(error_of("0 8 linear /a x") == "line 1: linear: invalid device sector");
    CHECK(error_of("0 8 snapshot /a /b P 8").find("unknown target type 'snapshot'") != std::string::npos);
    CHECK(error_of("# only comments\n\n") == "the table has no lines");
    CHECK(error_of("0 18446744073709551615 zero").find("too large") != std::string::npos);
    const std::string e = error_of("0 8 crypt aes-xts-plain64 " + kKey + "zz 0 /b 0");
    CHECK(e.rfind("line 1: crypt: ", 0) == 0);
    CHECK(e.find(kKey.substr(0, 16)) == std::string::npos);
    const std::string root(64, '0');
    CHECK(error_of("0 65 verity 1 /d /h 4096 4096 8 1 sha256 " + root + " -").find("multiple of the data block") !=
          std::string::npos);
    CHECK(error_of("0 72 verity 1 /d /h 4096 4096 8 1 sha256 " + root + " -").find("the tree 64") != std::string::npos);
    CHECK(error_of("0 64 verity 1 /d /h 4096 4096 8 1 sha256 nothex -").rfind("line 1: verity: ", 0) == 0);
}

TEST_CASE("dm table: a concatenation splits I/O and reports the first failure", "[dm_table]") {
    auto a = filled(8192, 1);
    std::vector<dm::Segment> segs{{0, plain(a)}, {8192, dm::make_zero_device(4096, false)},
                                   {12288, dm::make_error_device(1024)}, {13312, plain(filled(4096, 9))}};
    auto d = dm::make_concat_device(std::move(segs), false, "test");
    REQUIRE(d);
    CHECK((*d)->size() == 17408);
    CHECK((*d)->block_size() == 512);
    std::vector<uint8_t> buf(6144);
    REQUIRE(dm::read_sync(**d, 4096, Bytes(buf.data(), buf.size())) == Status::Ok);
    const auto pa = pattern(8192, 1);
    CHECK(std::equal(buf.begin(), buf.begin() + 4096, pa.begin() + 4096));
    CHECK(std::all_of(buf.begin() + 4096, buf.end(), [](uint8_t b) { return b == 0; }));
    CHECK(dm::read_sync(**d, 11776, Bytes(buf.data(), 1024)) == Status::IoError);  // zero, then error
    CHECK(dm::read_sync(**d, 12800, Bytes(buf.data(), 1024)) == Status::IoError);  // error, then plain
    REQUIRE(dm::read_sync(**d, 13312, Bytes(buf.data(), 4096)) == Status::Ok);
    const auto pb = pattern(4096, 9);
    CHECK(std::equal(pb.begin(), pb.end(), buf.begin()));
    // A write across linear and zero keeps the first part, drops the rest.
    std::vector<uint8_t> w(2048, 0xee);
    REQUIRE(dm::write_sync(**d, 7168, ConstBytes(w.data(), w.size())) == Status::Ok);
    std::vector<uint8_t> back(1024);
    REQUIRE(a->read(7168, Bytes(back.data(), back.size())) == Status::Ok);
    CHECK(std::all_of(back.begin(), back.end(), [](uint8_t b) { return b == 0xee; }));
    REQUIRE(dm::read_sync(**d, 8192, Bytes(back.data(), 1024)) == Status::Ok);
    CHECK(std::all_of(back.begin(), back.end(), [](uint8_t b) { return b == 0; }));
    CHECK(dm::read_sync(**d, 17408 - 512, Bytes(buf.data(), 1024)) == Status::Invalid);  // past the end
    CHECK(dm::read_sync(**d, 100, Bytes(buf.data(), 512)) == Status::Invalid);           // unaligned
}

TEST_CASE("dm table: boundaries on the largest block size, back to back", "[dm_table]") {
    auto crypt4k = [] {
        auto t = dm::parse_crypt_args("aes-xts-plain64 " + kKey + " 0 1 sector_size:4096");
        REQUIRE(t);
        auto tg = dm::CryptTarget::create(testutil::registry(), *t, std::make_shared<MemoryStore>(8192), 0);
        REQUIRE(tg);
        return dm::make_crypt_device(std::move(tg).value(), std::make_shared<MemoryStore>(1), false);
    };
    auto bad = dm::make_concat_device({{0, dm::make_zero_device(512, false)}, {512, crypt4k()}}, false, "x");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("4096-byte logical block size") != std::string::npos);
    auto good = dm::make_concat_device({{0, dm::make_zero_device(4096, false)}, {4096, crypt4k()}}, false, "x");
    REQUIRE(good);
    CHECK((*good)->block_size() == 4096);
    CHECK_FALSE(dm::make_concat_device({{0, dm::make_zero_device(512, false)},
                                         {1024, dm::make_zero_device(512, false)}},
                                        false, "x"));
    CHECK_FALSE(dm::make_linear_device(plain(filled(4096, 0)), 512, 4096));  // past the end
}

TEST_CASE("dm table: crypt over a linear table, as dmsetup stacks them", "[dm_table]") {
    Stores s;
    s.files["/disk"] = filled(64 * 1024, 3);
    // lower: sectors 16.. of /disk; upper: dm-crypt over lower, then zeros.
    auto lower = s.build("0 96 linear /disk 16\n");
    REQUIRE(lower);
    CHECK(s.opened_writable["/disk"]);
    s.mapper["/dev/mapper/lower"] = *lower;
    auto top = s.build("0 64 crypt aes-xts-plain64 " + kKey + " 0 /dev/mapper/lower 8\n64 32 zero\n");
    REQUIRE(top);
    CHECK((*top)->size() == 96 * 512);
    const auto data = pattern(32 * 1024, 5);
    REQUIRE(dm::write_sync(**top, 0, ConstBytes(data.data(), data.size())) == Status::Ok);
    REQUIRE((*top)->flush() == Status::Ok);
    // The ciphertext is at /disk sector 16 + 8; decrypted by a target of its own.
    auto t = dm::parse_crypt_args("aes-xts-plain64 " + kKey + " 0");
    REQUIRE(t);
    t->offset = 24;
    auto ref = dm::CryptTarget::create(testutil::registry(), *t, s.files["/disk"], 64);
    REQUIRE(ref);
    std::vector<uint8_t> got(data.size());
    dm::Bio bio;
    bio.dir = dm::BioDir::Read;
    bio.vecs = {{got.data(), got.size()}};
    REQUIRE((*ref)->submit_sync(bio) == Status::Ok);
    CHECK(got == data);
    std::vector<uint8_t> untouched(8 * 512);
    REQUIRE(s.files["/disk"]->read(8 * 512, Bytes(untouched.data(), untouched.size())) == Status::Ok);
    const auto orig = pattern(64 * 1024, 3);
    CHECK(std::equal(untouched.begin(), untouched.end(), orig.begin() + 8 * 512));
    CHECK(s.build("0 200 linear /disk 0\n").error().message.find("too small") != std::string::npos);
    CHECK(s.build("0 8 linear /nope 0\n").error().status == Status::IoError);
}

TEST_CASE("dm table: read-only tables open their files read-only", "[dm_table]") {
    Stores s;
    s.files["/disk"] = filled(8192, 3);
    auto ro = s.build("0 16 linear /disk 0\n", true);
    REQUIRE(ro);
    CHECK((*ro)->read_only());
    CHECK_FALSE(s.opened_writable["/disk"]);
    std::vector<uint8_t> b(512);
    CHECK(dm::write_sync(**ro, 0, ConstBytes(b.data(), b.size())) != Status::Ok);
}

namespace {
// A memory store whose discards zero the range (a file's hole).
class HoleStore final : public BackingStore {
public:
    explicit HoleStore(std::shared_ptr<MemoryStore> m) : m_(std::move(m)) {}
    Status read(uint64_t o, Bytes b) override { return m_->read(o, b); }
    Status write(uint64_t o, ConstBytes b) override { return m_->write(o, b); }
    uint64_t size() const override { return m_->size(); }
    Status discard(uint64_t o, uint64_t n) override {
        const std::vector<uint8_t> z(n);
        return m_->write(o, ConstBytes(z.data(), z.size()));
    }

private:
    std::shared_ptr<MemoryStore> m_;
};
}  // namespace

TEST_CASE("dm table: TRIM only when every target discards, split across them", "[dm_table]") {
    auto disk = filled(64 * 1024, 7);
    auto dev = [&] {
        dm::StoreDeviceOptions o;
        o.discard = true;
        o.threads = 1;
        auto d = dm::make_store_device(std::make_shared<HoleStore>(disk), o);
        REQUIRE(d);
        return *d;
    }();
    auto lin = [&](uint64_t off, uint64_t len) {
        auto l = dm::make_linear_device(dev, off, len);
        REQUIRE(l);
        return *l;
    };
    auto both = dm::make_concat_device({{0, lin(8192, 4096)}, {4096, lin(32768, 4096)}}, false, "x");
    REQUIRE(both);
    REQUIRE((*both)->can_discard());
    REQUIRE((*both)->discard(2048, 4096) == Status::Ok);  // the end of one line, the start of the next
    const auto orig = pattern(64 * 1024, 7);
    const auto& d = disk->data();
    CHECK(std::equal(d.begin() + 8192, d.begin() + 10240, orig.begin() + 8192));
    CHECK(std::all_of(d.begin() + 10240, d.begin() + 12288, [](uint8_t b) { return b == 0; }));
    CHECK(std::all_of(d.begin() + 32768, d.begin() + 34816, [](uint8_t b) { return b == 0; }));
    CHECK(std::equal(d.begin() + 34816, d.begin() + 36864, orig.begin() + 34816));
    CHECK((*both)->discard(0, 100) == Status::Invalid);
    auto with_zero = dm::make_concat_device({{0, lin(0, 4096)}, {4096, dm::make_zero_device(4096, false)}}, false, "x");
    REQUIRE(with_zero);
    CHECK_FALSE((*with_zero)->can_discard());
    CHECK((*with_zero)->discard(0, 4096) == Status::Unsupported);
    auto ro = dm::make_concat_device({{0, lin(0, 4096)}}, true, "x");
    REQUIRE(ro);
    CHECK_FALSE((*ro)->can_discard());
}
