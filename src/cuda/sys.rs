//! The CUDA driver and NVRTC calls that the compiler cannot check, each behind a safe function
//! whose arguments are enough to make the call sound: loading the libraries, starting the
//! driver and counting its GPUs, what a device is, opening a context, and timing two events.
//! Everything else in `cuda` calls these, or cudarc's safe types, and has no `unsafe` of its own.

use cudarc::driver::{result, safe, sys};
use std::sync::Arc;

/// True when the CUDA driver library can be loaded on this machine.
pub(super) fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda under its usual names; loads no symbol.
    unsafe { sys::is_culib_present() }
}

/// True when NVRTC (the run-time CUDA compiler) can be loaded on this machine.
pub(super) fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen libnvrtc under its usual names; loads no symbol.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Starts the driver (`cuInit`, which may be called any number of times) and counts the GPUs
/// it sees: the one start of CUDA in trtkit, for opening a GPU and for listing them. An error
/// comes with the name of the call that failed.
pub(super) fn init_and_count() -> Result<i32, (&'static str, result::DriverError)> {
    result::init().map_err(|e| ("cuInit", e))?;
    result::device::get_count().map_err(|e| ("cuDeviceGetCount", e))
}

/// The CUDA version the driver supports, as `cuDriverGetVersion` encodes it (`13000` is 13.0).
pub(super) fn driver_version() -> Result<i32, result::DriverError> {
    let mut version = 0;
    // SAFETY: cuDriverGetVersion writes one int through a valid pointer.
    unsafe { sys::cuDriverGetVersion(&mut version) }.result()?;
    Ok(version)
}

/// What the driver says of one device.
pub(super) struct DeviceFacts {
    /// Marketing name.
    pub name: String,
    /// Total device memory in bytes.
    pub(crate) memory_bytes: u64,
    /// Compute capability, major and minor.
    pub compute_capability: (i32, i32),
    /// The board's UUID bytes, where the driver gives them.
    pub(crate) uuid: Option<[u8; 16]>,
}

/// Reads what the driver says of device `index` (after [`init_and_count`]).
pub(super) fn device_facts(index: i32) -> Result<DeviceFacts, result::DriverError> {
    use sys::CUdevice_attribute::*;
    let dev = result::device::get(index)?;
    let name = result::device::get_name(dev)?;
    // SAFETY: `dev` is a device handle cuDeviceGet just returned; the call writes one size.
    let memory_bytes = unsafe { result::device::total_mem(dev)? } as u64;
    // SAFETY: as above; the attributes are plain integer queries.
    let compute_capability = unsafe {
        (
            result::device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            result::device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        )
    };
    let uuid = result::device::get_uuid(dev)
        .ok()
        .map(|u| u.bytes.map(|b| b as u8));
    Ok(DeviceFacts {
        name,
        memory_bytes,
        compute_capability,
        uuid,
    })
}

/// Opens the primary context of device `ordinal` with cudarc's event tracking off: trtkit
/// orders all its work on its own streams, and the extra events would be timed too.
pub(super) fn open_context(ordinal: usize) -> Result<Arc<safe::CudaContext>, result::DriverError> {
    let ctx = safe::CudaContext::new(ordinal)?;
    // SAFETY: the context value was made just above, so no buffer or stream of it exists yet;
    // trtkit never relies on cudarc's tracking events.
    unsafe { ctx.disable_event_tracking() };
    Ok(ctx)
}

/// Milliseconds from `start` to `end`, both already complete: no waiting, one driver call.
pub(super) fn elapsed_ms(
    start: &safe::CudaEvent,
    end: &safe::CudaEvent,
) -> Result<f32, result::DriverError> {
    // SAFETY: both handles are live events (borrowed for the call); cuEventElapsedTime only
    // reads them and reports an error if either is incomplete or of another context.
    unsafe { result::event::elapsed(start.cu_event(), end.cu_event()) }
}
