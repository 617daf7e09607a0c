// The running state shared by cmac and xcbc (the kernel's crypto/cmac.c and
// crypto/xcbc.c, whose update/final/export/import are the same code): a
// CBC-MAC that holds the last block back until more data shows it is not the
// last, then finishes it XORed with one subkey when complete, or padded with
// 10..0 and XORed with another. Only the subkeys differ (cmac's K1/K2, xcbc's
// K2/K3), so the state takes them from its tfm.
//
// Exported state (statesize = 2 * bs + 1 bytes):
//   [0, bs)       the running CBC-MAC block
//   [bs, 2bs)     buffered message bytes not yet enciphered
//   [2bs]         how many bytes of the buffer are used, 0..bs (0 only
//                 before any data, when the running block is zero)
#pragma once

#include <blkcrypt/internal/alg.hpp>

#include <cstddef>
#include <cstdint>

namespace blkcrypt {

class CbcMacState final : public ShashState {
public:
    static constexpr std::size_t kMaxBlock = 16;

    // cipher is keyed for the CBC-MAC; k_full and k_padded are bs-byte
    // subkeys. All three belong to the tfm, which outlives its states.
    CbcMacState(const CipherTfm& cipher, std::size_t bs, const uint8_t* k_full,
                const uint8_t* k_padded) noexcept
        : cipher_(cipher), bs_(bs), k_full_(k_full), k_padded_(k_padded) {}
    ~CbcMacState() override;

    void init() override;
    void update(ConstBytes data) override;
    void final(Bytes out) override;
    void export_state(Bytes out) const override;
    Status import_state(ConstBytes in) override;

    static constexpr std::size_t statesize(std::size_t bs) noexcept { return 2 * bs + 1; }

private:
    void absorb(const uint8_t* block);

    const CipherTfm& cipher_;
    std::size_t bs_;
    const uint8_t* k_full_;
    const uint8_t* k_padded_;
    uint8_t x_[kMaxBlock] = {};
    uint8_t buf_[kMaxBlock] = {};
    std::size_t count_ = 0;
};

}  // namespace blkcrypt
