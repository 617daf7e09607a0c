// Algorithm names: the parser, then a full registry lookup (which builds
// whatever templates the name asks for and self-tests them), then one use of
// what was found through its public handle, including empty inputs.
#include "fuzz_util.hpp"

#include <blkcrypt/aead.hpp>
#include <blkcrypt/alg_name.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>

#include <cstdlib>
#include <vector>

using namespace blkcrypt;
using Buf = std::vector<uint8_t>;

namespace {

Buf key_for(const AlgInfo& in) {
    std::size_t n = in.max_keysize ? in.min_keysize : 16;
    return Buf(n, 0x5a);
}

void use(Registry& reg, const AlgInfo& in) {
    switch (in.type) {
    case AlgType::Shash: {
        auto h = Shash::alloc(reg, in.driver);
        if (!h) return;
        if (in.needs_key && h->setkey(key_for(in)) != Status::Ok) return;
        Buf d(in.digestsize);
        (void)h->digest(ConstBytes{}, d);
        (void)h->digest(Buf(200, 1), d);
        if (auto desc = h->new_desc()) {  // empty (null) spans between real updates
            desc->init();
            desc->update(ConstBytes{});
            desc->update(Buf(70, 2));
            desc->update(ConstBytes{});
            (void)desc->finup(ConstBytes{}, d);
        }
        break;
    }
    case AlgType::Cipher:
    case AlgType::Skcipher: {
        auto c = Skcipher::alloc(reg, in.driver);
        if (!c || c->setkey(key_for(in)) != Status::Ok) return;
        Buf iv(c->ivsize(), 0), buf(std::max<std::size_t>(64, in.blocksize * 4), 7);
        (void)c->encrypt(buf, buf, iv);
        (void)c->decrypt(buf, buf, iv);
        break;
    }
    case AlgType::Aead: {
        auto a = Aead::alloc(reg, in.driver);
        if (!a || a->setkey(key_for(in)) != Status::Ok) return;
        Buf iv(a->ivsize(), 0), pt(33, 3), assoc(20, 4), ct(pt.size() + a->authsize()), back(pt.size());
        if (a->encrypt(assoc, pt, ct, iv) == Status::Ok) {
            iv.assign(a->ivsize(), 0);
            (void)a->decrypt(assoc, ct, back, iv);
        }
        break;
    }
    case AlgType::Ahash: break;  // the async path: cryptd's queue (bounded by name depth)
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto name = AlgName::parse(text);
    if (!name) return 0;
    // The canonical form parses back to itself.
    const std::string canon = name->str();
    auto again = AlgName::parse(canon);
    if (!again || again->str() != canon) std::abort();
    auto reg = fuzz::make_registry();
    auto info = reg->describe(canon);
    if (info) use(*reg, *info);
    return 0;
}
