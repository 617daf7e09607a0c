// Template: builds an algorithm instance from a name such as "cbc(aes)".
//
// create() looks its arguments up in the registry (its spawns), checks the
// combination and returns a new Alg whose names are derived mechanically:
// generic "tmpl(inner generic names)", driver "tmpl(inner driver names)".
// The registry self-tests and registers what create() returns.
#pragma once

#include <blkcrypt/alg_name.hpp>
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/registry.hpp>

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

namespace blkcrypt {

class Template {
public:
    virtual ~Template() = default;
    virtual std::string_view name() const = 0;
    virtual Result<std::shared_ptr<Alg>> create(Registry& reg, const AlgName& name) const = 0;

    std::string module = "blkcrypt";  // shown by `blkcrypt list`
    std::shared_ptr<void> module_handle;  // a plugin's shared object
};

// Fill name/driver/module/priority of an instance from its spawns, in order.
// Priority is the first spawn's (the kernel's rule for most templates).
void set_instance_names(AlgInfo& info, std::string_view tmpl,
                        std::initializer_list<const Alg*> spawns);

// Look up `name` as `type` for use as a spawn: a Result with a message that
// names the template asking ("cbc: ...").
Result<std::shared_ptr<const Alg>> grab_spawn(Registry& reg, std::string_view tmpl,
                                              const AlgName& name, AlgType type);

// Require exactly n arguments.
Result<void> check_arg_count(const AlgName& name, std::size_t n);

}  // namespace blkcrypt
