//! The forecast the first chapter speaks of, done: after the last epoch, the trained model's
//! prediction is fed back as its next input, lead after lead (6 h, 12 h, ... ahead at `dt` 1),
//! and each lead is checked against the truth in the validation data, beside persistence (the
//! forecast that nothing changes), the baseline a forecast has to beat. Errors are the
//! tutorial's latitude-weighted RMSE, per mapped channel, in the channel's units, averaged over
//! a few starting samples; the first start's maps are drawn at every lead.

use scalebook_shared::weather::{CHANNELS, Lead, LeadError, MAPPED_CHANNELS, MapEntry, Rollout, channel_index, encode_png, rollout_file};
use tch::{Kind, Tensor};

use super::maps::WeatherMaps;
use crate::Error;
use crate::data::Era5Dataset;
use crate::output::Logger;
use crate::train::Learner;
use crate::train::loss::weighted_rmse;

/// Steps rolled out: two days at the tutorial's 6-hourly data.
const LEADS: usize = 8;
/// Forecasts averaged: the validation set's first samples.
const STARTS: usize = 4;
/// Hours between two of the dataset's time steps.
const HOURS_PER_STEP: u64 = 6;

impl WeatherMaps {
    /// Rolls the model out from `valid`'s first samples and, where `writes` (rank 0), records the
    /// errors and maps in the index and logs them. Every rank of rank 0's tp-cp group takes part
    /// (a model-parallel forward needs the whole group). Nothing to do when the validation
    /// files hold no time step past the first prediction.
    pub fn roll_out(
        &mut self,
        learner: &Learner,
        valid: &Era5Dataset,
        epoch: u64,
        step: u64,
        writes: bool,
        log: &Logger,
    ) -> Result<(), Error> {
        let dt = valid.dt();
        let starts: Vec<usize> = (0..valid.len().min(STARTS)).collect();
        let mut leads = LEADS;
        for &s in &starts {
            leads = leads.min(valid.steps_after(s)? / dt.max(1));
        }
        if leads < 2 {
            return Ok(());
        }
        if writes {
            std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        }
        let [c, h, w] = self.shape;
        let dims = [1, c as i64, h as i64, w as i64];
        let read = |s: usize, ahead: usize| -> Result<Vec<f32>, Error> {
            let mut values = vec![0.0; valid.sample_len()];
            valid.read_ahead(s, ahead, &mut values)?;
            Ok(values)
        };
        let channels: Vec<usize> = MAPPED_CHANNELS.iter().filter_map(|name| channel_index(name)).filter(|&ch| ch < c).collect();
        // Per lead and mapped channel: the summed RMSE of the model and of persistence.
        let mut sums = vec![vec![(0.0, 0.0); channels.len()]; leads];
        let mut maps: Vec<Vec<MapEntry>> = vec![Vec::new(); leads];
        for (n, &s) in starts.iter().enumerate() {
            let start_values = read(s, 0)?;
            let start = Tensor::from_slice(&start_values).view(dims);
            let mut state = start.shallow_clone();
            for (k, lead_sums) in sums.iter_mut().enumerate() {
                state = learner.predict(&state)?.to_kind(Kind::Float).to_device(tch::Device::Cpu);
                let truth_values = read(s, (k + 1) * dt)?;
                let truth = Tensor::from_slice(&truth_values).view(dims);
                let model = Vec::<f32>::try_from(weighted_rmse(&state, &truth))?;
                let persistence = Vec::<f32>::try_from(weighted_rmse(&start, &truth))?;
                for (sum, &ch) in lead_sums.iter_mut().zip(&channels) {
                    let std = f64::from(self.stds[ch]);
                    sum.0 += f64::from(model[ch]) * std;
                    sum.1 += f64::from(persistence[ch]) * std;
                }
                if n == 0 && writes {
                    let hours = lead_hours(k + 1, dt);
                    let prediction = Vec::<f32>::try_from(state.flatten(0, -1))?;
                    maps[k] = self.draw_lead(epoch, step, s, hours, [&start_values, &truth_values, &prediction], &channels)?;
                }
            }
        }
        if !writes {
            return Ok(());
        }
        let count = starts.len() as f64;
        let leads: Vec<Lead> = sums
            .into_iter()
            .zip(maps)
            .enumerate()
            .map(|(k, (lead_sums, maps))| Lead {
                hours: lead_hours(k + 1, dt),
                errors: lead_sums
                    .into_iter()
                    .zip(&channels)
                    .map(|((model, persistence), &ch)| LeadError {
                        channel: CHANNELS[ch].name.to_owned(),
                        units: CHANNELS[ch].units.to_owned(),
                        model: model / count,
                        persistence: persistence / count,
                    })
                    .collect(),
                maps,
            })
            .collect();
        for lead in &leads {
            let words: Vec<String> = lead
                .errors
                .iter()
                .map(|e| format!("{} {:.4} {} (persistence {:.4})", e.channel, e.model, e.units, e.persistence))
                .collect();
            log.info(&format!("  Rollout +{}h: RMSE {}", lead.hours, words.join(", ")));
        }
        self.index.rollout = Some(Rollout { epoch, step, starts, leads });
        self.write_index()
    }

    /// The maps of one lead: the start, the truth at the lead, the forecast and its error.
    fn draw_lead(
        &self,
        epoch: u64,
        step: u64,
        sample: usize,
        hours: u64,
        grids: [&[f32]; 3],
        channels: &[usize],
    ) -> Result<Vec<MapEntry>, Error> {
        let [_, h, w] = self.shape;
        let mut entries = Vec::with_capacity(channels.len());
        for &ch in channels {
            let [start, truth, forecast] = grids.map(|values| self.physical(values, ch));
            let (mut entry, raster) = MapEntry::draw(epoch, step, sample, ch, [&start, &truth, &forecast], h, w);
            entry.file = rollout_file(hours, CHANNELS[ch].name);
            let path = self.dir.join(&entry.file);
            std::fs::write(&path, encode_png(&raster)?).map_err(|e| Error::io(&path, e))?;
            entries.push(entry);
        }
        Ok(entries)
    }
}

/// Hours ahead after `steps` steps of `dt` time steps each.
fn lead_hours(steps: usize, dt: usize) -> u64 {
    (steps * dt) as u64 * HOURS_PER_STEP
}
