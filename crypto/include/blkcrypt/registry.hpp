// Registry: algorithms and templates registered by name, composed on demand.
//
// lookup("essiv(cbc(aes),sha256)") returns the registered algorithm with that
// generic name and the highest priority among those whose self-test did not
// fail, or the one whose driver name matches exactly. A miss on a template
// name instantiates the template (recursively through its arguments), runs
// the instance's self-test and registers it; concurrent lookups of the same
// new name wait for a single construction.
#pragma once

#include <blkcrypt/alg_info.hpp>
#include <blkcrypt/status.hpp>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt {

class Alg;
class Template;

// What `blkcrypt list` shows for one algorithm.
struct AlgStatus {
    AlgInfo info;
    SelftestState selftest = SelftestState::Pending;
    std::string selftest_message;  // why it failed, or which vectors ran
    int refcnt = 1;
    bool superseded = false;  // a better inner algorithm appeared; lookups rebuild
};

struct SelftestOutcome {
    SelftestState state = SelftestState::NoVectors;
    std::string message;
};

// Runs the known-answer tests of one algorithm (installed by default: the
// vector-driven testmgr). `full` adds the long vectors and every buffer
// layout; registration runs the quick pass.
using SelftestFn = std::function<SelftestOutcome(const Alg&, bool full)>;

class Registry {
public:
    // A registry with the vector-driven self-test manager installed and
    // nothing registered. register_defaults() adds the built-in providers.
    Registry();
    explicit Registry(SelftestFn selftest);  // nullptr: skip tests (NoVectors)
    ~Registry();
    Registry(const Registry&) = delete;
    Registry& operator=(const Registry&) = delete;

    Result<void> register_alg(std::shared_ptr<Alg> alg);
    Result<void> register_algs(std::span<const std::shared_ptr<Alg>> algs);
    Result<void> unregister_alg(std::string_view driver);

    Result<void> register_template(std::shared_ptr<Template> tmpl);
    // All or nothing: on a clash none of the array is registered.
    Result<void> register_templates(std::span<const std::shared_ptr<Template>> tmpls);
    void unregister_templates(std::span<const std::shared_ptr<Template>> tmpls);

    // Best algorithm for `name` usable as `type` (a cipher serves as an ECB
    // skcipher and a shash as an ahash).
    Result<std::shared_ptr<const Alg>> lookup(std::string_view name, AlgType type);
    // Any type: what the name denotes.
    Result<std::shared_ptr<const Alg>> lookup_any(std::string_view name);

    // What lookup_any(name) finds, described (instantiating templates).
    Result<AlgInfo> describe(std::string_view name);

    std::vector<AlgStatus> list() const;
    std::vector<std::string> template_names() const;

    // Re-run the full self-test of every registered algorithm whose generic or
    // driver name is in `names` (all when empty); returns their new status.
    std::vector<AlgStatus> run_selftests(std::span<const std::string> names);

    // Storage for companion modules that keep per-registry state (the
    // plugin loader); lives as long as the registry.
    std::shared_ptr<void>& attachment(std::string_view key);

    struct Impl;  // opaque

private:
    std::unique_ptr<Impl> impl_;
};

// The built-in providers (Crypto++, OpenSSL) and templates. Fails (and stops)
// on a name clash, e.g. when called twice on one registry.
Result<void> register_defaults(Registry& reg);

}  // namespace blkcrypt
