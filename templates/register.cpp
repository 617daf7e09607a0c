// The list of built-in templates, registered as one array.
#include <blkcrypt/internal/template.hpp>

#include <vector>

namespace blkcrypt {

std::shared_ptr<Template> make_cryptd_template();

void register_builtin_templates(Registry& reg) {
    const std::vector<std::shared_ptr<Template>> all = {
        make_cryptd_template(),
    };
    (void)reg.register_templates(all);
}

}  // namespace blkcrypt
