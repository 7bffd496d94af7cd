// Declarations only; see ../context.h.
#pragma once
namespace gloo {
namespace transport {
class Device;
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo
