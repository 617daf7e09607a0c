// Every built-in template, registered as one array. The list is generated at
// build time from the factories the template sources define
// (cmake/list_templates.cmake), so a new templates/**/*.cpp is registered by
// defining "std::shared_ptr<Template> make_NAME_template()" and nothing else.
#include <blkcrypt/internal/builtin.hpp>
#include <blkcrypt/internal/template.hpp>

#include <vector>

namespace blkcrypt {

#define BLKCRYPT_TEMPLATE(name, file) std::shared_ptr<Template> make_##name##_template();
#include "builtin_templates.inc"
#undef BLKCRYPT_TEMPLATE

std::span<const BuiltinTemplate> builtin_template_list() {
    static const BuiltinTemplate list[] = {
#define BLKCRYPT_TEMPLATE(name, file) {#name, file, make_##name##_template},
#include "builtin_templates.inc"
#undef BLKCRYPT_TEMPLATE
    };
    return list;
}

Result<void> register_builtin_templates(Registry& reg) {
    std::vector<std::shared_ptr<Template>> all;
    for (const auto& t : builtin_template_list()) all.push_back(t.make());
    return reg.register_templates(all);
}

}  // namespace blkcrypt
