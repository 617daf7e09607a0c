#include <blkcrypt/internal/walk.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <algorithm>

namespace blkcrypt {

void SgWalk::Cursor::skip_empty() noexcept {
    while (idx < sg.size() && off >= sg[idx].len) {
        off -= sg[idx].len;
        ++idx;
    }
}

void SgWalk::Cursor::advance(std::size_t n) noexcept {
    off += n;
    skip_empty();
}

SgWalk::SgWalk(SgList src, SgList dst, std::size_t len, std::size_t unit)
    : remaining_(len), unit_(unit ? unit : 1) {
    src_.sg = src;
    dst_.sg = dst;
    src_.skip_empty();
    dst_.skip_empty();
}

SgWalk::~SgWalk() {
    // The bounce buffer held plaintext or key stream.
    secure_wipe(small_, sizeof small_);
    secure_wipe(big_.data(), big_.size());
}

bool SgWalk::next() {
    if (remaining_ == 0 || src_.idx >= src_.sg.size() || dst_.idx >= dst_.sg.size()) {
        n_ = 0;
        return false;
    }
    std::size_t n = std::min({src_.avail(), dst_.avail(), remaining_});
    if (n >= unit_) {
        n -= n % unit_;
    } else if (n < remaining_) {
        // A unit (or the tail) straddles a boundary: bounce it.
        std::size_t b = std::min(unit_, remaining_);
        uint8_t* buf = small_;
        if (b > sizeof small_) {
            if (big_.size() < b) big_.resize(b);
            buf = big_.data();
        }
        sg_gather(src_.rest(), src_.off, Bytes(buf, b));
        in_ = buf;
        out_ = buf;
        n_ = b;
        bounced_ = true;
        return true;
    }
    in_ = src_.ptr();
    out_ = dst_.ptr();
    n_ = n;
    bounced_ = false;
    return true;
}

void SgWalk::done() {
    if (bounced_) sg_scatter(dst_.rest(), dst_.off, ConstBytes(out_, n_));
    src_.advance(n_);
    dst_.advance(n_);
    remaining_ -= n_;
    pos_ += n_;
    n_ = 0;
}

}  // namespace blkcrypt
