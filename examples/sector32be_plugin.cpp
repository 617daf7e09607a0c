// The plugin of docs/plugins.md, verbatim: an IV mode for dm-crypt tables
// ("aes-xts-sector32be"), built as sector32be.so against the installed package.
#include <blkcrypt/internal/geniv.hpp>
#include <blkcrypt/plugin.hpp>

namespace {
using namespace blkcrypt;

class Sector32BeTfm final : public GenivTfm {
public:
    using GenivTfm::GenivTfm;
private:
    Status pre(GenivUnit& u) const override {  // u.iv is zeroed already
        for (int i = 0; i < 4; ++i) u.iv[i] = static_cast<uint8_t>(u.iv_sector >> (24 - 8 * i));
        return Status::Ok;
    }
};

int init(void* host) {
    static_cast<PluginHost*>(host)->add_template(
        std::make_shared<GenivTemplate>("sector32be", simple_geniv<Sector32BeTfm>()));
    return 0;
}

constexpr blkcrypt_plugin kPlugin = {BLKCRYPT_PLUGIN_ABI_VERSION, "sector32be",
                                     "IV = BE32 sector number", init};
}  // namespace

extern "C" const blkcrypt_plugin* blkcrypt_plugin_entry(void) { return &kPlugin; }
