//! Object-detection outputs: decoding raw YOLO heads into boxes, class-aware non-maximum
//! suppression, box-by-box agreement between two runs of a model, and COCO-style mean average
//! precision computed the way pycocotools' `COCOeval` does for bounding boxes.

pub mod boxes;
pub mod coco;
pub mod decode;
pub mod matching;
pub(crate) mod nms;
pub mod outputs;
