#include <blkcrypt/sg.hpp>

#include <blkcrypt/secure_buffer.hpp>

#include <algorithm>
#include <cstring>

namespace blkcrypt {

std::size_t sg_total(SgList sg) noexcept {
    std::size_t n = 0;
    for (const auto& e : sg) n += e.len;
    return n;
}

namespace {
// Calls fn(ptr, n, done) for each piece of sg within [offset, offset+len).
template <class Fn>
std::size_t for_each_piece(SgList sg, std::size_t offset, std::size_t len, Fn fn) noexcept {
    std::size_t done = 0;
    for (const auto& e : sg) {
        if (done == len) break;
        if (offset >= e.len) { offset -= e.len; continue; }
        std::size_t n = std::min(e.len - offset, len - done);
        fn(e.data + offset, n, done);
        done += n;
        offset = 0;
    }
    return done;
}
}  // namespace

uint8_t* sg_contiguous(SgList sg, std::size_t len) noexcept {
    for (const auto& e : sg) {
        if (e.len == 0) continue;
        return e.len >= len ? e.data : nullptr;
    }
    return nullptr;
}

std::size_t sg_gather(SgList sg, std::size_t offset, Bytes out) noexcept {
    return for_each_piece(sg, offset, out.size(), [&](uint8_t* p, std::size_t n, std::size_t at) {
        std::memcpy(out.data() + at, p, n);
    });
}

std::size_t sg_scatter(SgList sg, std::size_t offset, ConstBytes in) noexcept {
    return for_each_piece(sg, offset, in.size(), [&](uint8_t* p, std::size_t n, std::size_t at) {
        std::memcpy(p, in.data() + at, n);
    });
}

std::size_t sg_wipe(SgList sg, std::size_t offset, std::size_t len) noexcept {
    return for_each_piece(sg, offset, len, [](uint8_t* p, std::size_t n, std::size_t) { secure_wipe(p, n); });
}

std::span<SgEntry> sg_slice(SgList sg, std::size_t offset, std::size_t len,
                            std::span<SgEntry> out) noexcept {
    std::size_t k = 0;
    for_each_piece(sg, offset, len, [&](uint8_t* p, std::size_t n, std::size_t) {
        if (k < out.size()) out[k++] = SgEntry{p, n};
    });
    return out.first(k);
}

bool sg_same(SgList a, SgList b) noexcept {
    if (a.data() == b.data() && a.size() == b.size()) return true;
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].data != b[i].data || a[i].len != b[i].len) return false;
    return true;
}

}  // namespace blkcrypt
