// BM_aead_crypt_openssl/evp-aes-256-gcm/4096: what `openssl speed -evp
// aes-256-gcm -bytes 4096` measures (one context, a fresh 12-byte IV, 4096
// bytes and the tag per call) on one core: the baseline of issue 24's
// aes-gcm-random target (the engine on 2 cores at least 1.5x this).
#include <benchmark/benchmark.h>
#include <openssl/evp.h>

#include <cstdint>
#include <vector>

namespace {

void BM_aead_crypt_openssl(benchmark::State& st) {
    std::vector<uint8_t> in(4096, 0x5a), out(4096);
    uint8_t key[32] = {1, 2, 3}, iv[12] = {}, tag[16], aad[20] = {};
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key, nullptr);
    int len = 0;
    for (auto _ : st) {
        ++iv[0];
        if (EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, iv) != 1 ||
            EVP_EncryptUpdate(ctx, nullptr, &len, aad, sizeof aad) != 1 ||
            EVP_EncryptUpdate(ctx, out.data(), &len, in.data(), 4096) != 1 ||
            EVP_EncryptFinal_ex(ctx, out.data() + len, &len) != 1 ||
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag) != 1) {
            st.SkipWithError("EVP failed");
            break;
        }
        benchmark::DoNotOptimize(tag);
    }
    EVP_CIPHER_CTX_free(ctx);
    st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * 4096);
}
BENCHMARK(BM_aead_crypt_openssl)->Name("BM_aead_crypt_openssl/evp-aes-256-gcm/4096");

}  // namespace
