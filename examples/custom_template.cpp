// custom_template: write a template and plug it into the registry.
// "double(H)" is the hash H(H(m)) (Bitcoin's sha256d is double(sha256)) for
// any unkeyed synchronous hash H. The template API is the one the built-in
// templates use: <blkcrypt/internal/template.hpp> and internal/alg.hpp.
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/shash.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

using namespace blkcrypt;

namespace {

// One running computation: the inner hash's state, rehashed on final().
class DoubleState final : public ShashState {
public:
    DoubleState(std::unique_ptr<ShashState> h, std::size_t ds) : h_(std::move(h)), ds_(ds) {}
    void init() override { h_->init(); }
    void update(ConstBytes data) override { h_->update(data); }
    void final(Bytes out) override {
        std::vector<uint8_t> first(ds_);
        h_->final(first);
        h_->init();
        h_->finup(first, out);
    }
    // Before final() the state is just H's, so it exports as H's does.
    void export_state(Bytes out) const override { h_->export_state(out); }
    Status import_state(ConstBytes in) override { return h_->import_state(in); }

private:
    std::unique_ptr<ShashState> h_;
    std::size_t ds_;
};

// A transform (one per Shash handle); const and thread-safe.
class DoubleTfm final : public ShashTfm {
public:
    DoubleTfm(std::unique_ptr<ShashTfm> h, std::size_t ds) : h_(std::move(h)), ds_(ds) {}
    std::unique_ptr<ShashState> new_state() const override {
        return std::make_unique<DoubleState>(h_->new_state(), ds_);
    }

private:
    std::unique_ptr<ShashTfm> h_;
    std::size_t ds_;
};

// The registered algorithm: a description plus a factory. Its Spawn member
// holds the inner hash and records itself with the instance (so the registry
// rebuilds double(sha256) when a better sha256 registers).
class DoubleAlg final : public ShashAlg {
public:
    DoubleAlg(AlgInfo info, SpawnRef<ShashAlg> h) : ShashAlg(std::move(info)), h_(*this, std::move(h)) {}
    std::unique_ptr<ShashTfm> create_tfm() const override {
        return std::make_unique<DoubleTfm>(h_.create_tfm(), h_.info().digestsize);
    }

private:
    Spawn<ShashAlg> h_;
};

class DoubleTemplate final : public Template {
public:
    std::string_view name() const override { return "double"; }
    // Called by the registry on a lookup miss for "double(<something>)".
    Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const override {
        if (auto r = check_arg_count(name, 1); !r) return r.error();
        auto h = grab_spawn<ShashAlg>(reg, "double", name.args()[0]);
        if (!h) return h.error();
        const AlgInfo& hi = h->info();
        if (hi.type != AlgType::Shash || hi.needs_key)
            return make_error(Status::Invalid, "double: '" + hi.name + "' is not an unkeyed shash");
        AlgInfo info;
        info.module = module;
        set_instance_names(info, "double", {&h->alg()});  // double(sha256), double(sha256-openssl)
        info.type = AlgType::Shash;
        info.blocksize = hi.blocksize;
        info.digestsize = hi.digestsize;
        info.statesize = hi.statesize;
        return std::shared_ptr<Alg>(std::make_shared<DoubleAlg>(info, std::move(*h)));
    }
};

}  // namespace

int main() {
    Registry reg;
    if (auto r = register_defaults(reg); !r) {
        std::fprintf(stderr, "%s\n", r.error().message.c_str());
        return 1;
    }
    auto tmpl = std::make_shared<DoubleTemplate>();
    tmpl->module = "example";
    if (auto r = reg.register_template(tmpl); !r) {
        std::fprintf(stderr, "register: %s\n", r.error().message.c_str());
        return 1;
    }

    auto d = Shash::alloc(reg, "double(sha256)");  // instantiated on this lookup
    auto h = Shash::alloc(reg, "sha256");
    if (!d || !h) {
        std::fprintf(stderr, "alloc: %s\n", (d ? h.error() : d.error()).message.c_str());
        return 1;
    }
    const char* msg = "hello";
    ConstBytes m(reinterpret_cast<const uint8_t*>(msg), std::strlen(msg));
    std::vector<uint8_t> got(32), once(32), want(32);
    if (d->digest(m, got) != Status::Ok || h->digest(m, once) != Status::Ok ||
        h->digest(once, want) != Status::Ok)
        return 1;

    // No vectors exist for double(sha256): usable, self-test state NoVectors.
    SelftestState st = SelftestState::Pending;
    for (const auto& s : reg.list())
        if (s.info.driver == d->info().driver) st = s.selftest;

    std::printf("%s (driver %s, self-test %s)\n", d->info().name.c_str(), d->info().driver.c_str(),
                st == SelftestState::NoVectors ? "NoVectors: usable, no vectors" : to_string(st));
    std::printf("double(sha256)(\"hello\") = ");
    for (uint8_t b : got) std::printf("%02x", b);
    std::printf("\n%s sha256(sha256(\"hello\"))\n", got == want ? "equals" : "DIFFERS from");
    return got == want && st == SelftestState::NoVectors ? 0 : 1;
}
