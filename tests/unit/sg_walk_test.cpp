// Tests for the scatter-gather helpers (sg.hpp) and the SgWalk walker:
// "the scatter-gather walker handles every split of a multi-block buffer,
// in place and out of place".
#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/sg.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

using blkcrypt::Bytes;
using blkcrypt::ConstBytes;
using blkcrypt::SgEntry;
using blkcrypt::SgList;
using blkcrypt::SgWalk;

namespace {

constexpr std::size_t kGuard = 8;
constexpr uint8_t kGuardByte = 0xA5;

// The byte pattern a buffer starts with; seed tells src from dst.
uint8_t pattern(std::size_t i, uint8_t seed) {
    return static_cast<uint8_t>(i * 7 + seed + (i >> 3));
}

// The transform applied by the walk callbacks: depends on the absolute stream
// position and so on the block index and the position within the block.
uint8_t key_stream(std::size_t pos) {
    return static_cast<uint8_t>(pos * 31 + (pos / 16) * 101 + 1);
}

// A scatter-gather list over separately placed segments: every segment lives
// in its own region of one arena, with guard bytes before, between and after.
class Segments {
public:
    Segments(const std::vector<std::size_t>& lens, uint8_t seed) {
        std::size_t size = kGuard;
        for (auto l : lens) size += l + kGuard;
        arena_.assign(size, kGuardByte);
        std::size_t at = kGuard;
        std::size_t pos = 0;
        for (auto l : lens) {
            entries_.push_back(SgEntry{arena_.data() + at, l});
            for (std::size_t i = 0; i < l; ++i) arena_[at + i] = pattern(pos + i, seed);
            at += l + kGuard;
            pos += l;
        }
        total_ = pos;
        initial_ = arena_;
    }
    Segments(const Segments&) = delete;
    Segments& operator=(const Segments&) = delete;

    SgList list() const { return SgList(entries_.data(), entries_.size()); }
    std::size_t total() const { return total_; }

    std::vector<uint8_t> flat() const {
        std::vector<uint8_t> v;
        for (const auto& e : entries_) v.insert(v.end(), e.data, e.data + e.len);
        return v;
    }
    std::vector<uint8_t> initial_flat() const {
        std::vector<uint8_t> v;
        for (const auto& e : entries_) {
            auto at = static_cast<std::size_t>(e.data - arena_.data());
            v.insert(v.end(), initial_.begin() + static_cast<std::ptrdiff_t>(at),
                     initial_.begin() + static_cast<std::ptrdiff_t>(at + e.len));
        }
        return v;
    }
    // True when no byte outside the segments changed.
    bool guards_intact() const {
        std::vector<bool> inside(arena_.size(), false);
        for (const auto& e : entries_)
            for (std::size_t i = 0; i < e.len; ++i)
                inside[static_cast<std::size_t>(e.data - arena_.data()) + i] = true;
        for (std::size_t i = 0; i < arena_.size(); ++i)
            if (!inside[i] && arena_[i] != kGuardByte) return false;
        return true;
    }
    bool unchanged() const { return arena_ == initial_; }

    // Address of stream byte pos, or nullptr past the end.
    const uint8_t* addr(std::size_t pos) const {
        for (const auto& e : entries_) {
            if (pos < e.len) return e.data + pos;
            pos -= e.len;
        }
        return nullptr;
    }
    // Bytes contiguous in memory from stream position pos within one entry.
    std::size_t run(std::size_t pos) const {
        for (const auto& e : entries_) {
            if (pos < e.len) return e.len - pos;
            pos -= e.len;
        }
        return 0;
    }

private:
    std::vector<uint8_t> arena_, initial_;
    std::vector<SgEntry> entries_;
    std::size_t total_ = 0;
};

std::string describe(const std::vector<std::size_t>& v) {
    std::ostringstream os;
    os << '{';
    for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
    os << '}';
    return os.str();
}

struct Chunk {
    std::size_t offset, len;
    bool bounced;
    const uint8_t* in;
    uint8_t* out;
};

// Walks src -> dst (dst == nullptr: in place over src) for len bytes with the
// given unit, applying key_stream. Returns "" on success, else what went wrong.
std::string walk_and_check(Segments& src, Segments* dst_or_null, std::size_t len,
                           std::size_t unit, std::vector<Chunk>* chunks_out = nullptr) {
    const bool in_place = dst_or_null == nullptr;
    Segments& dst = in_place ? src : *dst_or_null;
    const std::vector<uint8_t> src_before = src.flat();
    const std::vector<uint8_t> dst_before = dst.flat();
    const std::size_t eff_unit = unit ? unit : 1;

    std::vector<Chunk> chunks;
    {
        SgList sl = src.list();
        SgList dl = in_place ? sl : dst.list();
        if (in_place && !blkcrypt::sg_same(sl, dl)) return "sg_same false for in place";
        SgWalk w(sl, dl, len, unit);
        std::size_t guard = 0;
        for (; w.next(); w.done()) {
            if (++guard > len + 2) return "walk does not terminate";
            Chunk c{w.offset(), w.len(), w.bounced(), w.in(), w.out()};
            chunks.push_back(c);
            if (c.len == 0) return "zero-length chunk";
            if (c.offset + c.len > len) return "chunk runs past len";
            for (std::size_t i = 0; i < c.len; ++i)
                c.out[i] = static_cast<uint8_t>(c.in[i] ^ key_stream(c.offset + i));
        }
        if (w.len() != 0) return "len() not 0 after the walk";
        if (w.next()) return "next() true after the walk ended";
    }
    if (chunks_out) *chunks_out = chunks;

    // Chunks tile [0, len) in order.
    std::size_t pos = 0;
    for (std::size_t k = 0; k < chunks.size(); ++k) {
        const Chunk& c = chunks[k];
        std::ostringstream where;
        where << "chunk " << k << " (offset " << c.offset << ", len " << c.len
              << (c.bounced ? ", bounced" : "") << "): ";
        if (c.offset != pos) return where.str() + "offset() is not the bytes done before it";
        const bool last = k + 1 == chunks.size();
        const std::size_t remaining = len - c.offset;
        if (!last && c.len % eff_unit != 0) return where.str() + "not a whole number of units";
        if (last && c.len % eff_unit != 0 && c.len != remaining)
            return where.str() + "partial unit that is not the tail";
        const std::size_t src_run = src.run(c.offset), dst_run = dst.run(c.offset);
        if (c.bounced) {
            const std::size_t want = std::min(eff_unit, remaining);
            if (c.len != want) return where.str() + "bounced chunk is not one unit (or the tail)";
            if (c.in != c.out) return where.str() + "bounced chunk is not processed in place";
            // A bounce is only needed when the unit straddles a boundary.
            if (src_run >= c.len && dst_run >= c.len)
                return where.str() + "bounced although contiguous in src and dst";
        } else {
            if (c.in != src.addr(c.offset)) return where.str() + "in() is not the src position";
            if (c.out != dst.addr(c.offset)) return where.str() + "out() is not the dst position";
            if (c.len > src_run || c.len > dst_run)
                return where.str() + "direct chunk crosses a segment boundary";
            // Longest span: one more unit would not have fitted.
            const std::size_t room = std::min({src_run, dst_run, remaining});
            if (c.len < remaining && room - c.len >= eff_unit)
                return where.str() + "chunk is shorter than the contiguous span allows";
        }
        pos += c.len;
    }
    if (pos != len) return "chunks cover " + std::to_string(pos) + " of " + std::to_string(len);

    // dst: transformed bytes in [0, len), untouched after.
    const std::vector<uint8_t> out = dst.flat();
    for (std::size_t i = 0; i < out.size(); ++i) {
        const uint8_t want =
            i < len ? static_cast<uint8_t>(src_before[i] ^ key_stream(i)) : dst_before[i];
        if (out[i] != want) return "dst byte " + std::to_string(i) + " is wrong";
    }
    if (!dst.guards_intact()) return "a dst guard byte was overwritten";
    if (!in_place) {
        if (!src.unchanged()) return "src was modified by an out-of-place walk";
        if (!src.guards_intact()) return "a src guard byte was overwritten";
    }
    return "";
}

// All ways of cutting total into n segments (cut points anywhere in 0..total,
// so empty segments at either end or in the middle are included).
void for_each_split(std::size_t total, int n,
                    const std::function<void(const std::vector<std::size_t>&)>& fn) {
    if (n == 1) { fn({total}); return; }
    if (n == 2) {
        for (std::size_t a = 0; a <= total; ++a) fn({a, total - a});
        return;
    }
    for (std::size_t a = 0; a <= total; ++a)
        for (std::size_t b = a; b <= total; ++b) fn({a, b - a, total - b});
}

// Runs one src/dst layout both in place and out of place; reports the first
// failure with its layout.
struct Runner {
    int failures = 0;
    int walks = 0;
    std::string first;

    void run(const std::vector<std::size_t>& src_lens, const std::vector<std::size_t>& dst_lens,
             std::size_t len, std::size_t unit, bool in_place) {
        ++walks;
        Segments src(src_lens, 0x11);
        std::string err;
        if (in_place) {
            err = walk_and_check(src, nullptr, len, unit);
        } else {
            Segments dst(dst_lens, 0x5C);
            err = walk_and_check(src, &dst, len, unit);
        }
        if (!err.empty() && failures++ == 0) {
            first = err + " [src " + describe(src_lens) +
                    (in_place ? " in place" : " -> dst " + describe(dst_lens)) + ", len " +
                    std::to_string(len) + ", unit " + std::to_string(unit) + "]";
        }
    }
};

#define CHECK_RUNNER(r)          \
    do {                         \
        INFO((r).first);         \
        CHECK((r).failures == 0); \
        CHECK((r).walks > 0);    \
    } while (0)

}  // namespace

// ---------------------------------------------------------------- sg.hpp

TEST_CASE("sg_total", "[sg]") {
    uint8_t buf[32] = {};
    CHECK(blkcrypt::sg_total({}) == 0);
    const SgEntry one[] = {{buf, 32}};
    CHECK(blkcrypt::sg_total(one) == 32);
    const SgEntry several[] = {{buf, 0}, {buf, 5}, {nullptr, 0}, {buf + 5, 27}, {buf, 0}};
    CHECK(blkcrypt::sg_total(several) == 32);
}

TEST_CASE("sg_gather and sg_scatter at every offset and length", "[sg]") {
    const std::vector<std::size_t> lens = {0, 5, 16, 0, 1, 20, 0};
    Segments seg(lens, 0x33);
    const std::size_t total = seg.total();
    REQUIRE(total == 42);
    REQUIRE(blkcrypt::sg_total(seg.list()) == total);
    const std::vector<uint8_t> flat = seg.flat();

    int bad = 0;
    for (std::size_t off = 0; off <= total + 3; ++off) {
        for (std::size_t n = 0; n <= total + 3; ++n) {
            const std::size_t want = off >= total ? 0 : std::min(n, total - off);
            // gather
            std::vector<uint8_t> out(n + 4, 0xEE);
            std::size_t got = blkcrypt::sg_gather(seg.list(), off, Bytes(out.data(), n));
            bool ok = got == want;
            for (std::size_t i = 0; ok && i < want; ++i) ok = out[i] == flat[off + i];
            for (std::size_t i = want; ok && i < out.size(); ++i) ok = out[i] == 0xEE;
            // scatter, then restore
            Segments target(lens, 0x33);
            std::vector<uint8_t> in(n);
            for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<uint8_t>(0x80 + i);
            std::size_t put = blkcrypt::sg_scatter(target.list(), off, ConstBytes(in));
            ok = ok && put == want && target.guards_intact();
            const std::vector<uint8_t> t = target.flat();
            for (std::size_t i = 0; ok && i < total; ++i) {
                const bool written = i >= off && i < off + want;
                ok = t[i] == (written ? in[i - off] : flat[i]);
            }
            if (!ok && bad++ == 0) {
                INFO("offset " << off << ", length " << n);
                CHECK(ok);
            }
        }
    }
    CHECK(bad == 0);
}

TEST_CASE("sg_gather and sg_scatter on an empty list", "[sg]") {
    uint8_t b[4] = {1, 2, 3, 4};
    CHECK(blkcrypt::sg_gather({}, 0, Bytes(b, 4)) == 0);
    CHECK(blkcrypt::sg_scatter({}, 0, ConstBytes(b, 4)) == 0);
    CHECK(b[0] == 1);
    CHECK(b[3] == 4);
}

TEST_CASE("sg_slice at every offset and length", "[sg]") {
    const std::vector<std::size_t> lens = {3, 0, 16, 16, 0, 7};
    Segments seg(lens, 0x44);
    const std::size_t total = seg.total();
    const std::vector<uint8_t> flat = seg.flat();

    int bad = 0;
    for (std::size_t off = 0; off <= total + 2; ++off) {
        for (std::size_t n = 0; n <= total + 2; ++n) {
            std::vector<SgEntry> room(lens.size());
            auto sl = blkcrypt::sg_slice(seg.list(), off, n, room);
            const std::size_t want = off >= total ? 0 : std::min(n, total - off);
            std::ostringstream why;
            if (sl.data() != room.data()) why << "not a prefix of out; ";
            if (blkcrypt::sg_total(sl) != want) why << "total " << blkcrypt::sg_total(sl) << "; ";
            std::size_t pos = off;
            for (const auto& e : sl) {
                if (e.len == 0) why << "empty entry; ";
                // Each entry points at the original memory, in order.
                if (e.data != seg.addr(pos)) why << "entry at stream " << pos << " misplaced; ";
                if (e.len > seg.run(pos)) why << "entry crosses a segment; ";
                pos += e.len;
            }
            std::vector<uint8_t> g(want);
            if (blkcrypt::sg_gather(SgList(sl.data(), sl.size()), 0, g) != want ||
                !std::equal(g.begin(), g.end(), flat.begin() + static_cast<std::ptrdiff_t>(
                                                                 std::min(off, total))))
                why << "gathered bytes differ; ";
            if (!why.str().empty() && bad++ == 0) {
                INFO("offset " << off << ", length " << n << ": " << why.str());
                CHECK(why.str().empty());
            }
        }
    }
    CHECK(bad == 0);

    // Exact entries for one case: bytes [2, 40) of {3,0,16,16,0,7}.
    std::vector<SgEntry> room(lens.size());
    auto sl = blkcrypt::sg_slice(seg.list(), 2, 38, room);
    REQUIRE(sl.size() == 4);
    CHECK(sl[0].data == seg.list()[0].data + 2);
    CHECK(sl[0].len == 1);
    CHECK(sl[1].data == seg.list()[2].data);
    CHECK(sl[1].len == 16);
    CHECK(sl[2].data == seg.list()[3].data);
    CHECK(sl[2].len == 16);
    CHECK(sl[3].data == seg.list()[5].data);
    CHECK(sl[3].len == 5);
}

TEST_CASE("sg_same", "[sg]") {
    uint8_t a[32], b[32];
    const SgEntry l1[] = {{a, 16}, {a + 16, 16}};
    const SgEntry l2[] = {{a, 16}, {a + 16, 16}};  // same memory, another array
    const SgEntry l3[] = {{a, 16}, {b, 16}};
    const SgEntry l4[] = {{a, 16}, {a + 16, 15}};
    const SgEntry l5[] = {{a, 32}};
    const SgEntry l6[] = {{a, 16}};
    CHECK(blkcrypt::sg_same(l1, l1));
    CHECK(blkcrypt::sg_same(l1, l2));
    CHECK(blkcrypt::sg_same(l2, l1));
    CHECK_FALSE(blkcrypt::sg_same(l1, l3));
    CHECK_FALSE(blkcrypt::sg_same(l1, l4));
    CHECK_FALSE(blkcrypt::sg_same(l1, l5));
    CHECK_FALSE(blkcrypt::sg_same(l1, l6));
    CHECK_FALSE(blkcrypt::sg_same(l6, l1));
    CHECK(blkcrypt::sg_same(SgList{}, SgList{}));
    CHECK(blkcrypt::sg_same(SgList(l1).first(1), SgList(l6)));
}

// ---------------------------------------------------------------- SgWalk

TEST_CASE("SgWalk: contiguous buffers", "[sg]") {
    for (std::size_t total : {64u, 69u}) {
        Runner r;
        r.run({total}, {total}, total, 16, true);
        r.run({total}, {total}, total, 16, false);
        CHECK_RUNNER(r);

        // One direct chunk for the blocks, one for the tail, nothing bounced.
        Segments src({total}, 1), dst({total}, 2);
        std::vector<Chunk> chunks;
        REQUIRE(walk_and_check(src, &dst, total, 16, &chunks).empty());
        REQUIRE(chunks.size() == (total == 64 ? 1u : 2u));
        CHECK(chunks[0].len == 64);
        CHECK_FALSE(chunks[0].bounced);
        if (total == 69) {
            CHECK(chunks[1].offset == 64);
            CHECK(chunks[1].len == 5);
            CHECK_FALSE(chunks[1].bounced);
        }
    }
}

TEST_CASE("SgWalk: every 2-way split of src, in place and out of place", "[sg]") {
    for (std::size_t total : {64u, 69u}) {
        Runner r;
        for_each_split(total, 2, [&](const std::vector<std::size_t>& s) {
            r.run(s, {}, total, 16, true);
            r.run(s, {total}, total, 16, false);
        });
        INFO("total " << total);
        CHECK_RUNNER(r);
        CHECK(r.walks == 2 * static_cast<int>(total + 1));
    }
}

TEST_CASE("SgWalk: every 3-way split of src, in place and out of place", "[sg]") {
    for (std::size_t total : {64u, 69u}) {
        Runner r;
        for_each_split(total, 3, [&](const std::vector<std::size_t>& s) {
            r.run(s, {}, total, 16, true);
            r.run(s, {total}, total, 16, false);
        });
        INFO("total " << total);
        CHECK_RUNNER(r);
    }
}

TEST_CASE("SgWalk: every 2-way split of dst, out of place", "[sg]") {
    for (std::size_t total : {64u, 69u}) {
        Runner r;
        for_each_split(total, 2, [&](const std::vector<std::size_t>& d) {
            r.run({total}, d, total, 16, false);
        });
        INFO("total " << total);
        CHECK_RUNNER(r);
    }
}

TEST_CASE("SgWalk: every 2-way split of src against every 2-way split of dst", "[sg]") {
    for (std::size_t total : {64u, 69u}) {
        Runner r;
        for_each_split(total, 2, [&](const std::vector<std::size_t>& s) {
            for_each_split(total, 2,
                           [&](const std::vector<std::size_t>& d) { r.run(s, d, total, 16, false); });
        });
        INFO("total " << total);
        CHECK_RUNNER(r);
    }
}

TEST_CASE("SgWalk: every 3-way split of src against every 2-way split of dst", "[sg]") {
    Runner r;
    const std::size_t total = 69;
    for_each_split(total, 3, [&](const std::vector<std::size_t>& s) {
        for (std::size_t d = 0; d <= total; d += 3) r.run(s, {d, total - d}, total, 16, false);
    });
    CHECK_RUNNER(r);
}

TEST_CASE("SgWalk: a block straddling a boundary is bounced", "[sg]") {
    // src {20, 49}: [0,16) direct, [16,32) bounced, [32,64) direct, [64,69) tail.
    for (bool in_place : {true, false}) {
        Segments src({20, 49}, 3), dst({69}, 4);
        std::vector<Chunk> c;
        REQUIRE(walk_and_check(src, in_place ? nullptr : &dst, 69, 16, &c).empty());
        REQUIRE(c.size() == 4);
        CHECK((c[0].offset == 0 && c[0].len == 16 && !c[0].bounced));
        CHECK((c[1].offset == 16 && c[1].len == 16 && c[1].bounced));
        CHECK((c[2].offset == 32 && c[2].len == 32 && !c[2].bounced));
        CHECK((c[3].offset == 64 && c[3].len == 5 && !c[3].bounced));
    }
    // The tail itself straddles: src {66, 3}.
    Segments src({66, 3}, 5), dst({69}, 6);
    std::vector<Chunk> c;
    REQUIRE(walk_and_check(src, &dst, 69, 16, &c).empty());
    REQUIRE(c.size() == 2);
    CHECK((c[0].len == 64 && !c[0].bounced));
    CHECK((c[1].offset == 64 && c[1].len == 5 && c[1].bounced));
}

TEST_CASE("SgWalk: zero-length segments", "[sg]") {
    const std::vector<std::vector<std::size_t>> layouts = {
        {0, 64},          {64, 0},         {0, 0, 64, 0, 0}, {0, 16, 0, 48},
        {16, 0, 0, 48},   {0, 7, 0, 57, 0}, {10, 0, 30, 0, 24}, {1, 0, 62, 0, 1},
        {0, 69},          {0, 33, 0, 36, 0}, {16, 0, 16, 0, 16, 0, 16, 0, 5, 0},
    };
    Runner r;
    for (const auto& s : layouts) {
        std::size_t total = 0;
        for (auto l : s) total += l;
        r.run(s, {}, total, 16, true);
        r.run(s, {total}, total, 16, false);
        r.run({total}, s, total, 16, false);
        r.run(s, s, total, 16, false);
        for (std::size_t d = 0; d <= total; ++d) {
            r.run(s, {0, d, 0, total - d, 0}, total, 16, false);
            r.run({0, d, 0, total - d, 0}, s, total, 16, false);
        }
    }
    CHECK_RUNNER(r);

    // A list that is nothing but empty entries.
    Segments empty({0, 0, 0}, 7);
    SgWalk w(empty.list(), empty.list(), 0, 16);
    CHECK_FALSE(w.next());
}

TEST_CASE("SgWalk: len shorter than the lists", "[sg]") {
    for (std::size_t total : {64u, 69u}) {
        Runner r;
        for (std::size_t len = 0; len <= total; ++len) {
            for_each_split(total, 2, [&](const std::vector<std::size_t>& s) {
                r.run(s, {}, len, 16, true);
                r.run(s, {total}, len, 16, false);
                r.run({total}, s, len, 16, false);
                // dst list longer than src list
                r.run(s, {total + 11}, len, 16, false);
            });
        }
        INFO("total " << total);
        CHECK_RUNNER(r);
    }
}

TEST_CASE("SgWalk: len = 0", "[sg]") {
    Segments src({32, 32}, 8), dst({16, 48}, 9);
    {
        SgWalk w(src.list(), dst.list(), 0, 16);
        CHECK_FALSE(w.next());
        CHECK(w.len() == 0);
        CHECK(w.offset() == 0);
    }
    {
        SgWalk w(src.list(), src.list(), 0, 16);
        CHECK_FALSE(w.next());
    }
    {
        SgWalk w(SgList{}, SgList{}, 0, 16);
        CHECK_FALSE(w.next());
    }
    CHECK(src.unchanged());
    CHECK(dst.unchanged());
}

TEST_CASE("SgWalk: unit 1 never bounces", "[sg]") {
    for (std::size_t total : {64u, 69u}) {
        Runner r;
        for_each_split(total, 3, [&](const std::vector<std::size_t>& s) {
            r.run(s, {}, total, 1, true);
            r.run(s, {total}, total, 1, false);
        });
        for_each_split(total, 2, [&](const std::vector<std::size_t>& s) {
            for_each_split(total, 2,
                           [&](const std::vector<std::size_t>& d) { r.run(s, d, total, 1, false); });
        });
        INFO("total " << total);
        CHECK_RUNNER(r);

        // One chunk per piece where both lists are contiguous, none bounced.
        Segments src({10, 30, total - 40}, 1), dst({25, total - 25}, 2);
        std::vector<Chunk> c;
        REQUIRE(walk_and_check(src, &dst, total, 1, &c).empty());
        REQUIRE(c.size() == 4);  // cuts at 10, 25, 40
        for (const auto& ch : c) CHECK_FALSE(ch.bounced);
        CHECK(c[0].len == 10);
        CHECK(c[1].len == 15);
        CHECK(c[2].len == 15);
        CHECK(c[3].len == total - 40);
    }
}

TEST_CASE("SgWalk: unit 0 behaves as unit 1", "[sg]") {
    Runner r;
    for_each_split(69, 2, [&](const std::vector<std::size_t>& s) {
        r.run(s, {}, 69, 0, true);
        r.run(s, {30, 39}, 69, 0, false);
    });
    CHECK_RUNNER(r);
}

TEST_CASE("SgWalk: unit 64", "[sg]") {
    for (std::size_t total : {64u, 69u, 128u, 133u}) {
        Runner r;
        for_each_split(total, 2, [&](const std::vector<std::size_t>& s) {
            r.run(s, {}, total, 64, true);
            r.run(s, {total}, total, 64, false);
            r.run({total}, s, total, 64, false);
        });
        if (total <= 69) {
            for_each_split(total, 3, [&](const std::vector<std::size_t>& s) {
                r.run(s, {}, total, 64, true);
                r.run(s, {total}, total, 64, false);
            });
        }
        INFO("total " << total);
        CHECK_RUNNER(r);
    }
    // src {30, 39}, unit 64: the whole first unit is bounced, then the tail.
    Segments src({30, 39}, 1), dst({69}, 2);
    std::vector<Chunk> c;
    REQUIRE(walk_and_check(src, &dst, 69, 64, &c).empty());
    REQUIRE(c.size() == 2);
    CHECK((c[0].len == 64 && c[0].bounced));
    CHECK((c[1].offset == 64 && c[1].len == 5 && !c[1].bounced));
}

TEST_CASE("SgWalk: units larger than the built-in bounce buffer", "[sg]") {
    Runner r;
    const std::size_t total = 2 * 96 + 7;
    for (std::size_t a = 0; a <= total; a += 5) {
        r.run({a, total - a}, {}, total, 96, true);
        r.run({a, total - a}, {total - a, a}, total, 96, false);
        r.run({a, total - a}, {total}, total - 3, 96, false);
    }
    CHECK_RUNNER(r);
}
