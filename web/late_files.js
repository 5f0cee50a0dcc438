// web/late_files.js — the files that arrive after the lab has started: the shipped models that only
// some lessons compare (web/CMakeLists.txt packs them into models.data and lists them in models.json).
// The page fetches them once the lab has drawn its first frame (host_web.cpp calls late.start()), so
// they do not delay it, and writes them into the page's file system in one go. Module.tttlabLate tells the app how it went (host_web.cpp
// polls it every frame); until then, the engine waits for a model it asks for
// (app/lab/engine/late_resources.hpp). A small note in the corner shows the progress.
'use strict';
function tttlabLoadLateFiles(Module, note) {
  const late = {settled: false, error: '', received: 0, total: 0};
  Module.tttlabLate = late;
  const show = (text) => { note.textContent = text; note.style.display = text ? '' : 'none'; };
  const mb = (n) => (n / 1048576).toFixed(1);
  const fail = (why) => {
    late.error = String(why);
    late.settled = true;
    console.warn('TTT Lab: the lessons\' other models could not be downloaded: ' + late.error);
    show('The lessons\' other models could not be downloaded (' + late.error + '); reload the page to try again.');
  };
  const get = (name) => fetch(name).then((r) => {
    if (!r.ok) throw new Error('HTTP ' + r.status + ' for ' + name);
    return r;
  });
  late.start = () => get('models.json').then((r) => r.json()).then(async (meta) => {
    late.total = meta.remote_package_size;
    const response = await get('models.data');
    const data = new Uint8Array(late.total);
    const reader = response.body.getReader();
    for (;;) {
      const {done, value} = await reader.read();
      if (done) break;
      if (late.received + value.length > late.total) throw new Error('models.data is larger than models.json says');
      data.set(value, late.received);
      late.received += value.length;
      show('Downloading the lessons\' other models: ' + mb(late.received) + ' of ' + mb(late.total) + ' MB');
    }
    if (late.received !== late.total) throw new Error('models.data ended after ' + late.received + ' of ' + late.total + ' bytes');
    for (const f of meta.files) {
      FS.mkdirTree(f.filename.substring(0, f.filename.lastIndexOf('/')));
      FS.writeFile(f.filename, data.subarray(f.start, f.end));
    }
    late.settled = true;
    show('');
    console.log('TTTLAB_LATE_FILES ' + meta.files.length + ' files, ' + late.total + ' bytes');
  }).catch(fail);
}
