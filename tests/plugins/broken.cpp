// One source, seven broken plugins (tests of the loader's refusals), chosen
// by BROKEN_<kind>: no entry point, a wrong ABI version, a driver name that
// already exists, a driver failing its own vectors, an init that fails, and
// malformed vectors for built-in algorithms (a keyed hash without a key, an
// AEAD IV shorter than ivsize).
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/plugin.hpp>

#include <cstring>

namespace {

using namespace blkcrypt;

// A "hash" that outputs the first 4 bytes of the message (or zeros).
class FirstBytes final : public ShashState {
public:
    void init() override { n_ = 0, std::memset(d_, 0, 4); }
    void update(ConstBytes in) override {
        for (uint8_t b : in)
            if (n_ < 4) d_[n_++] = b;
    }
    void final(Bytes out) override { std::memcpy(out.data(), d_, 4); }
    void export_state(Bytes) const override {}
    Status import_state(ConstBytes) override { return Status::Unsupported; }

private:
    uint8_t d_[4];
    std::size_t n_ = 0;
};

class FirstBytesAlg final : public ShashAlg {
public:
    explicit FirstBytesAlg(const char* driver) : ShashAlg(make_info(driver)) {}
    std::unique_ptr<ShashTfm> create_tfm() const override {
        struct Tfm final : ShashTfm {
            std::unique_ptr<ShashState> new_state() const override { return std::make_unique<FirstBytes>(); }
        };
        return std::make_unique<Tfm>();
    }

private:
    static AlgInfo make_info(const char* driver) {
        AlgInfo i;
        i.name = "firstbytes";
        i.driver = driver;
        i.type = AlgType::Shash;
        i.digestsize = 4;
        return i;
    }
};

int init(void* host_ptr) {
    auto& host = *static_cast<PluginHost*>(host_ptr);
#if defined(BROKEN_dup_driver)
    host.add_alg(std::make_shared<FirstBytesAlg>("sha256-cryptopp"));  // taken by the built-ins
#elif defined(BROKEN_bad_selftest)
    host.add_vectors("[firstbytes]\nmsg = \"abcdef\"\ndigest = 61626364\n\nmsg = \"xyz\"\ndigest = 78797a00ff\n",
                     "broken.cpp");
    host.add_alg(std::make_shared<FirstBytesAlg>("firstbytes-broken"));
#elif defined(BROKEN_vec_no_key)
    // A keyed hash's vector without its key: the raw transform was never keyed.
    host.add_vectors("[cmac(camellia)]\nmsg = \"abc\"\ndigest = 00112233445566778899aabbccddeeff\n",
                     "broken_vec_no_key.cpp");
#elif defined(BROKEN_vec_short_iv)
    // An ESP IV of 1 byte where rfc4309 reads 8.
    host.add_vectors("[rfc4309(ccm(camellia))]\nkey = 000102030405060708090a0b0c0d0e0f010203\niv = 01\n"
                     "assoc = 00000000000000000000000000000000\nptext = 00\n"
                     "ctext = 0000000000000000000000000000000000\n",
                     "broken_vec_short_iv.cpp");
#elif defined(BROKEN_init_fails)
    host.fail("this plugin needs hardware that is not here");
    return 1;
#else
    host.add_alg(std::make_shared<FirstBytesAlg>("firstbytes-generic"));
#endif
    return 0;
}

#if defined(BROKEN_bad_abi)
constexpr uint32_t kAbi = BLKCRYPT_PLUGIN_ABI_VERSION + 41;
#else
constexpr uint32_t kAbi = BLKCRYPT_PLUGIN_ABI_VERSION;
#endif
constexpr blkcrypt_plugin kPlugin = {kAbi, "broken", "a broken plugin for tests", init};

}  // namespace

#if !defined(BROKEN_no_entry)
extern "C" const blkcrypt_plugin* blkcrypt_plugin_entry(void) { return &kPlugin; }
#else
extern "C" const blkcrypt_plugin* some_other_symbol(void) { return &kPlugin; }
#endif
