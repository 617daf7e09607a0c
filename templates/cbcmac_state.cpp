// The running state shared by cmac and xcbc; see cbcmac_state.hpp.
#include "cbcmac_state.hpp"

#include <blkcrypt/internal/bytes_util.hpp>
#include <blkcrypt/secure_buffer.hpp>

#include <algorithm>
#include <cstring>

namespace blkcrypt {

CbcMacState::~CbcMacState() {
    secure_wipe(x_, sizeof x_);
    secure_wipe(buf_, sizeof buf_);
}

void CbcMacState::init() {
    std::memset(x_, 0, sizeof x_);
    count_ = 0;
}

void CbcMacState::update(ConstBytes data) {
    if (data.empty()) return;
    std::size_t n = std::min(bs_ - count_, data.size());
    std::memcpy(buf_ + count_, data.data(), n);
    count_ += n;
    data = data.subspan(n);
    if (data.empty()) return;  // the buffered block may be the last one
    // More data follows: the buffered block is not the last.
    absorb(buf_);
    // Keep at least one byte back for final().
    while (data.size() > bs_) {
        absorb(data.data());
        data = data.subspan(bs_);
    }
    std::memcpy(buf_, data.data(), data.size());
    count_ = data.size();
}

void CbcMacState::final(Bytes out) {
    if (count_ == bs_) {
        xor_into(x_, k_full_, bs_);
    } else {
        buf_[count_] = 0x80;
        std::memset(buf_ + count_ + 1, 0, bs_ - count_ - 1);
        xor_into(x_, k_padded_, bs_);
    }
    xor_into(x_, buf_, bs_);
    cipher_.encrypt(x_, x_, 1);
    std::memcpy(out.data(), x_, bs_);
}

void CbcMacState::export_state(Bytes out) const {
    std::memcpy(out.data(), x_, bs_);
    std::memcpy(out.data() + bs_, buf_, bs_);
    out[2 * bs_] = static_cast<uint8_t>(count_);
}

Status CbcMacState::import_state(ConstBytes in) {
    if (in.size() != statesize(bs_) || in[2 * bs_] > bs_) return Status::Invalid;
    // Nothing buffered happens only before any data, with a zero block.
    if (in[2 * bs_] == 0 && std::any_of(in.begin(), in.begin() + bs_, [](uint8_t b) { return b; }))
        return Status::Invalid;
    std::memcpy(x_, in.data(), bs_);
    std::memcpy(buf_, in.data() + bs_, bs_);
    count_ = in[2 * bs_];
    return Status::Ok;
}

void CbcMacState::absorb(const uint8_t* block) {
    xor_into(x_, block, bs_);
    cipher_.encrypt(x_, x_, 1);
}

}  // namespace blkcrypt
