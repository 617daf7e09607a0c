// Empty spans (whose data() may be null) through every shash: an update or
// digest of nothing must be a no-op, never a memcpy from a null pointer
// (UBSan reports that; the sanitizer CI build runs this test).
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/testvec.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

using namespace blkcrypt;
using Buf = std::vector<uint8_t>;

TEST_CASE("every shash takes empty updates and an empty message", "[shash][empty]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    // Instantiate the template-built hashes too (hmac(...), cmac(...), ...).
    for (const auto& n : builtin_vector_names()) (void)reg.lookup_any(n);
    std::size_t tested = 0;
    for (const auto& st : reg.list()) {
        const AlgInfo& in = st.info;
        if (in.type != AlgType::Shash || st.selftest == SelftestState::Failed) continue;
        INFO(in.driver);
        auto h = Shash::alloc(reg, in.driver);
        REQUIRE(h.ok());
        if (in.needs_key) {
            std::size_t k = std::max<std::size_t>(in.min_keysize, 16);
            if (in.max_keysize) k = std::min(k, in.max_keysize);
            REQUIRE(h->setkey(Buf(k, 0x42)) == Status::Ok);
        }
        const ConstBytes none;  // data() == nullptr
        REQUIRE(none.data() == nullptr);
        Buf want(in.digestsize), got(in.digestsize);
        const Buf zero_len_storage(1);
        REQUIRE(h->digest(ConstBytes(zero_len_storage).first(0), want) == Status::Ok);
        REQUIRE(h->digest(none, got) == Status::Ok);
        CHECK(got == want);

        // Empty updates between real ones change nothing.
        const Buf msg(100, 0x61);
        REQUIRE(h->digest(msg, want) == Status::Ok);
        auto d = h->new_desc();
        REQUIRE(d.ok());
        d->init();  // init and update cannot fail
        d->update(none);
        d->update(ConstBytes(msg).first(40));
        d->update(none);
        d->update(ConstBytes(msg).subspan(40));
        REQUIRE(d->finup(none, got) == Status::Ok);
        CHECK(got == want);
        ++tested;
    }
    CHECK(tested >= 20);
}
